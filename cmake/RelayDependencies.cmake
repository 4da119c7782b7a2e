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
# (~130 instructions against ~25 for operator new; bench/callgrind.sh).
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

# tcmalloc (Debian libgoogle-perftools-dev): a gateway allocates small objects
# per request on every worker; tcmalloc's per-thread caches make that cheap.
# Never with sanitizers (RelaySanitizers.cmake): they intercept malloc themselves.
option(RELAY_USE_TCMALLOC "Link the binaries with tcmalloc_minimal when it is installed" ON)
add_library(relay_malloc INTERFACE)
if(RELAY_USE_TCMALLOC AND RELAY_SANITIZE)
  message(STATUS "kimi-relay: tcmalloc not linked in a sanitizer build")
elseif(RELAY_USE_TCMALLOC)
  find_library(TCMALLOC_MINIMAL NAMES tcmalloc_minimal libtcmalloc_minimal.so.4)
  if(TCMALLOC_MINIMAL)
    target_link_libraries(relay_malloc INTERFACE ${TCMALLOC_MINIMAL})
    message(STATUS "kimi-relay: linking ${TCMALLOC_MINIMAL}")
  endif()
endif()
