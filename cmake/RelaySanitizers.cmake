# Sanitizer and fuzzing builds (docs/fuzzing.md). Each applies to every target
# of the build dir it is configured in, so each has a build dir of its own:
#
#   RELAY_SANITIZE=address,undefined  build-asan-ubsan  (scripts/test.sh --sanitize address,undefined)
#   RELAY_SANITIZE=thread             build-tsan        (scripts/test.sh --sanitize thread)
#   RELAY_FUZZ=ON, CXX=clang++-14     build-fuzz        (scripts/fuzz.sh)
#
# Both optimise at -O1 with debug info and frame pointers, whatever the build
# type says (these flags come after the build type's on the command line), so
# a report's stack names every frame. No other allocator is linked with them: it
# replaces the allocator the sanitizers intercept.
set(RELAY_SANITIZE "" CACHE STRING
    "-fsanitize= list for every target: address,undefined or thread (empty: none)")
option(RELAY_FUZZ "Build only the libFuzzer targets of tests/fuzz (clang), with ASan and UBSan" OFF)

if(RELAY_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "RELAY_FUZZ=ON needs clang for libFuzzer: configure with CXX=clang++-14")
  endif()
  if(RELAY_SANITIZE AND NOT RELAY_SANITIZE STREQUAL "address,undefined")
    message(FATAL_ERROR "RELAY_FUZZ=ON always uses address,undefined; leave RELAY_SANITIZE empty")
  endif()
  set(RELAY_SANITIZE "address,undefined")
  # Coverage instrumentation for every relay library; only the fuzz targets
  # themselves link libFuzzer's main (-fsanitize=fuzzer, tests/fuzz).
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(RELAY_SANITIZE)
  if(RELAY_SANITIZE MATCHES "thread" AND RELAY_SANITIZE MATCHES "address")
    message(FATAL_ERROR "RELAY_SANITIZE: thread cannot be combined with address")
  endif()
  add_compile_options(-fsanitize=${RELAY_SANITIZE} -fno-omit-frame-pointer -O1 -g)
  add_link_options(-fsanitize=${RELAY_SANITIZE})
  if(RELAY_SANITIZE MATCHES "undefined")
    # Undefined behaviour stops the process like any other sanitizer error,
    # so a test (or the fuzzer) cannot pass over it.
    add_compile_options(-fno-sanitize-recover=all)
    # clang 14's -fsanitize=function cannot compile coroutines ("Cannot
    # represent a difference across sections", llvm-project#49689), and every
    # session in src/net is one: that one check is left out there.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 15)
      add_compile_options(-fno-sanitize=function)
    endif()
  endif()
  message(STATUS "kimi-relay: sanitizers ${RELAY_SANITIZE}")
endif()
