// Invariant checks for the fuzz targets: a violated one prints what broke and
// aborts, which libFuzzer reports as a crash, saving the input that did it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

#define FUZZ_CHECK(condition, what)                                                \
  do {                                                                             \
    if (!(condition)) ::relay::fuzz::fail(__FILE__, __LINE__, #condition, (what)); \
  } while (false)

namespace relay::fuzz {

[[noreturn]] inline void fail(const char* file, int line, const char* condition,
                              std::string_view what) {
  std::fprintf(stderr, "%s:%d: invariant violated: %.*s\n  check: %s\n", file, line,
               static_cast<int>(what.size()), what.data(), condition);
  std::abort();
}

}  // namespace relay::fuzz
