# Compiler launcher and warnings. ccache is used when present: Asio/Beast
# translation units cost 10-30 s each, so a cache hit matters.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
endif()

function(relay_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
endfunction()

# Calls into shared libraries (mimalloc's malloc and free, memcpy, the
# clock: about 150 per JSON request) load their target from the GOT and call
# it, instead of calling a PLT stub that jumps there: one jump fewer each
# (callgrind: 128 fewer instructions per JSON request). Without the PLT there
# is no lazy binding; the loader resolves those symbols at start.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options(-fno-plt)
endif()
