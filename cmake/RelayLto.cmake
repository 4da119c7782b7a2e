# Link-time optimisation of the gateway: a Release build with GCC compiles
# the relay's modules and kimi-relay's own sources with -flto
# -ffat-lto-objects, and links kimi-relay with -flto, so that calls between
# modules (the HTTP/1.1 parser into Headers, the session into sendNow, the
# pipeline into telemetry) are inlined and laid out as one program
# (docs/benchmarks.md, "Link-time optimisation": 6.4 % fewer instructions
# per JSON request). The modules' objects also hold ordinary machine code
# (fat), so the mock and the test binaries, whose own sources are compiled
# as usual, link as before, without a whole-program pass each.
# Not with the profile-generating pass (its counters are per object), nor
# with sanitizers or clang.
option(RELAY_LTO "Link kimi-relay with link-time optimisation (GCC Release builds)" ON)

set(RELAY_LTO_ACTIVE OFF)
if(RELAY_LTO AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_BUILD_TYPE STREQUAL "Release"
   AND NOT RELAY_PGO STREQUAL "generate" AND NOT RELAY_SANITIZE)
  find_program(RELAY_GCC_AR gcc-ar)
  find_program(RELAY_GCC_RANLIB gcc-ranlib)
  if(RELAY_GCC_AR AND RELAY_GCC_RANLIB)
    set(CMAKE_AR ${RELAY_GCC_AR})
    set(CMAKE_CXX_ARCHIVE_FINISH "${RELAY_GCC_RANLIB} <TARGET>")
    set(RELAY_LTO_ACTIVE ON)
    message(STATUS "kimi-relay: link-time optimisation on")
  endif()
endif()

# relay_lto_objects(target): the target's objects carry the program for the
# whole-program pass (and ordinary code beside it).
function(relay_lto_objects target)
  if(RELAY_LTO_ACTIVE)
    target_compile_options(${target} PRIVATE -flto=auto -ffat-lto-objects)
  endif()
endfunction()

# relay_lto(target): the target's link is the whole-program pass.
function(relay_lto target)
  if(RELAY_LTO_ACTIVE)
    relay_lto_objects(${target})
    target_link_options(${target} PRIVATE -flto=auto)
  endif()
endfunction()
