// Copies of a few bytes without a call to memcpy: head fields are written
// piece by piece ("name", ": ", "value", CRLF), a few dozen pieces per
// request, most under 17 bytes, and each memcpy call cost a call, a PLT jump
// and a size dispatch for a copy of one or two words.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace relay {

// Copies [from, from + n) to `to` (the two must not overlap). Up to 16 bytes
// as two word copies that may overlap each other (the second ends at the last
// byte), so no byte is read or written outside the two ranges.
[[gnu::always_inline]] inline void copySmall(char* to, const char* from, std::size_t n) {
  if (n >= 8) {
    if (n > 16) {
      std::memcpy(to, from, n);
      return;
    }
    std::uint64_t a, b;
    std::memcpy(&a, from, 8);
    std::memcpy(&b, from + n - 8, 8);
    std::memcpy(to, &a, 8);
    std::memcpy(to + n - 8, &b, 8);
  } else if (n >= 4) {
    std::uint32_t a, b;
    std::memcpy(&a, from, 4);
    std::memcpy(&b, from + n - 4, 4);
    std::memcpy(to, &a, 4);
    std::memcpy(to + n - 4, &b, 4);
  } else if (n != 0) {
    // 1 to 3 bytes: the first, the middle (the first again when n == 1 or 2
    // gives index 0 or 1) and the last.
    to[0] = from[0];
    to[n / 2] = from[n / 2];
    to[n - 1] = from[n - 1];
  }
}

}  // namespace relay
