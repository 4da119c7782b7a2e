# Profile-guided optimisation: scripts/build.sh drives the two passes for a
# Release build with GCC (docs/benchmarks.md, "Built from a profile").
#   RELAY_PGO=generate  instrumented binaries; running them writes the profile
#                       (.gcda files) into RELAY_PGO_DIR (scripts/pgo-train.sh)
#   RELAY_PGO=use       every translation unit optimised with that profile
# Object paths are taken relative to the build directory, so the profile of
# one build directory is found by another.
set(RELAY_PGO "" CACHE STRING "Profile-guided optimisation pass: empty (off), generate or use")
set(RELAY_PGO_DIR "" CACHE PATH "The profile's directory (RELAY_PGO=generate writes it, use reads it)")

if(RELAY_PGO)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    message(FATAL_ERROR "RELAY_PGO needs GCC (its .gcda profile format), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  if(NOT RELAY_PGO_DIR)
    message(FATAL_ERROR "RELAY_PGO=${RELAY_PGO} needs RELAY_PGO_DIR")
  endif()
  set(relay_pgo_prefix -fprofile-prefix-path=${CMAKE_BINARY_DIR})
  if(RELAY_PGO STREQUAL "generate")
    # Atomic counters: a gateway's worker threads run the same code.
    add_compile_options(-fprofile-generate=${RELAY_PGO_DIR} -fprofile-update=atomic ${relay_pgo_prefix})
    add_link_options(-fprofile-generate=${RELAY_PGO_DIR})
  elseif(RELAY_PGO STREQUAL "use")
    # partial-training: a function the training never ran (HTTP/2, TLS,
    # Redis, the admin API) is optimised as without a profile, not for size.
    # A file edited since the training keeps the profile of the functions
    # whose shape is unchanged; the others are built without one (GCC warns).
    add_compile_options(-fprofile-use=${RELAY_PGO_DIR} -fprofile-partial-training ${relay_pgo_prefix}
                        -Wno-missing-profile -Wno-error=coverage-mismatch)
  else()
    message(FATAL_ERROR "RELAY_PGO must be empty, generate or use, not '${RELAY_PGO}'")
  endif()
  message(STATUS "kimi-relay: profile-guided optimisation, pass '${RELAY_PGO}', profile in ${RELAY_PGO_DIR}")
endif()
