# Every dependency comes from Debian 12's packages (scripts/install-deps.sh).
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(OpenSSL 3 REQUIRED)
find_package(Boost 1.81.0 EXACT REQUIRED CONFIG)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(spdlog REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED COMPONENTS core)
find_package(PkgConfig REQUIRED)
pkg_check_modules(NGHTTP2 REQUIRED IMPORTED_TARGET libnghttp2>=1.52)
add_library(nghttp2 INTERFACE)
target_link_libraries(nghttp2 INTERFACE PkgConfig::NGHTTP2)

# The HTTP/2 front end relies on nghttp2's rapid-reset mitigation
# (CVE-2023-44487) and CONTINUATION-flood limit (CVE-2024-28182) as backstops
# behind its own flood allowance. Upstream has them from 1.57.0 / 1.61.0;
# Debian 12 backports both to 1.52.0 (1.52.0-1+deb12u1 and later). Test for
# the functions, not the version number.
include(CheckSymbolExists)
set(CMAKE_REQUIRED_INCLUDES ${NGHTTP2_INCLUDE_DIRS})
set(CMAKE_REQUIRED_LIBRARIES ${NGHTTP2_LINK_LIBRARIES})
check_symbol_exists(nghttp2_option_set_stream_reset_rate_limit "nghttp2/nghttp2.h"
                    RELAY_NGHTTP2_RESET_RATE_LIMIT)
check_symbol_exists(nghttp2_option_set_max_continuations "nghttp2/nghttp2.h"
                    RELAY_NGHTTP2_MAX_CONTINUATIONS)
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_LIBRARIES)
if(NOT RELAY_NGHTTP2_RESET_RATE_LIMIT OR NOT RELAY_NGHTTP2_MAX_CONTINUATIONS)
  message(FATAL_ERROR
    "kimi-relay: libnghttp2 ${NGHTTP2_VERSION} lacks the HTTP/2 flood fixes: "
    "nghttp2_option_set_stream_reset_rate_limit (rapid reset, CVE-2023-44487) and "
    "nghttp2_option_set_max_continuations (CVE-2024-28182). Install nghttp2 >= 1.61, or "
    "Debian 12's libnghttp2-dev >= 1.52.0-1+deb12u2 (apt-get upgrade libnghttp2-dev).")
endif()
message(STATUS "kimi-relay: libnghttp2 ${NGHTTP2_VERSION} with the rapid-reset and CONTINUATION-flood fixes")

# Asio and Beast, header-only, with the settings every translation unit that
# includes them must share. Only net/, upstream/ and the binaries link this.
add_library(relay_asio INTERFACE)
target_link_libraries(relay_asio INTERFACE Boost::headers)
# Coroutine frames and handler blocks: Asio recycles each thread's last two
# freed blocks of a kind (first fit) and gets new ones from aligned_alloc.
# A request has more frames of more sizes live than that, so about eight of
# its frames came from aligned_alloc, which tcmalloc serves on a slow path
# (~130 instructions against ~25 for operator new; bench/callgrind.sh,
# measured when the binaries linked tcmalloc).
# Without std/boost aligned allocation Asio takes operator new, whose blocks
# are aligned for any fundamental type (16 bytes here) — enough for every
# frame and handler we have; none is over-aligned (UBSan's alignment check
# runs in the sanitizer suite). A larger recycling cache was tried and lost:
# a first-fit scan over more slots costs more than it saves.
target_compile_definitions(relay_asio INTERFACE
  BOOST_ASIO_NO_DEPRECATED
  BOOST_ASIO_DISABLE_BOOST_COROUTINE
  BOOST_ASIO_DISABLE_STD_ALIGNED_ALLOC
  BOOST_ASIO_DISABLE_BOOST_ALIGN)
# With that, GCC 12 (at -O1, the sanitizer builds) sees a frame from
# ::operator new given to awaitable_frame_base::operator delete and warns
# (-Wmismatched-new-delete). The pair is matched: that operator delete hands
# the block to Asio's recycling cache or to ::operator delete.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(relay_asio INTERFACE -Wno-mismatched-new-delete)
endif()

# The allocator. A gateway allocates small objects per request on every
# worker, so it wants per-thread caches, and a sidecar wants a small resident
# set. mimalloc (Debian libmimalloc-dev) gives both: on bench/callgrind.sh it
# costs what tcmalloc costs per request (38.8k instructions against 38.8k;
# glibc's malloc 46.3k, jemalloc 40.2k), and a 1-worker gateway starts at
# 12.5 MiB against tcmalloc's 16.4 — gperftools 2.10 zeroes a 1 MiB page-map
# root and a 2 MiB leaf at start-up (docs/benchmarks.md, "Allocator").
#   RELAY_MALLOC=mimalloc (default) | tcmalloc | system
# Never with sanitizers (RelaySanitizers.cmake): they intercept malloc themselves.
set(RELAY_MALLOC "mimalloc" CACHE STRING "Allocator linked into the binaries: mimalloc, tcmalloc or system")
add_library(relay_malloc INTERFACE)
if(RELAY_SANITIZE AND NOT RELAY_MALLOC STREQUAL "system")
  message(STATUS "kimi-relay: ${RELAY_MALLOC} not linked in a sanitizer build")
elseif(RELAY_MALLOC STREQUAL "mimalloc")
  find_library(RELAY_MIMALLOC NAMES mimalloc libmimalloc.so.2 REQUIRED)
  target_link_libraries(relay_malloc INTERFACE ${RELAY_MIMALLOC})
  target_compile_definitions(relay_malloc INTERFACE RELAY_MALLOC_MIMALLOC)
  message(STATUS "kimi-relay: linking ${RELAY_MIMALLOC}")
elseif(RELAY_MALLOC STREQUAL "tcmalloc")
  find_library(RELAY_TCMALLOC NAMES tcmalloc_minimal libtcmalloc_minimal.so.4 REQUIRED)
  target_link_libraries(relay_malloc INTERFACE ${RELAY_TCMALLOC})
  target_compile_definitions(relay_malloc INTERFACE RELAY_MALLOC_TCMALLOC)
  message(STATUS "kimi-relay: linking ${RELAY_TCMALLOC}")
elseif(NOT RELAY_MALLOC STREQUAL "system")
  message(FATAL_ERROR "RELAY_MALLOC must be mimalloc, tcmalloc or system, not '${RELAY_MALLOC}'")
endif()
