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

# Asio and Beast, header-only, with the settings every translation unit that
# includes them must share. Only net/, upstream/ and the binaries link this.
add_library(relay_asio INTERFACE)
target_link_libraries(relay_asio INTERFACE Boost::headers)
target_compile_definitions(relay_asio INTERFACE
  BOOST_ASIO_NO_DEPRECATED
  BOOST_ASIO_DISABLE_BOOST_COROUTINE)

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
