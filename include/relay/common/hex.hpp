// Lowercase hexadecimal digits, two per table lookup: ids, trace ids and
// digests are written on every request.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace relay {

namespace detail {
inline constexpr std::array<char, 512> kHexPairs = [] {
  constexpr char kDigits[] = "0123456789abcdef";
  std::array<char, 512> pairs{};
  for (int byte = 0; byte < 256; ++byte) {
    pairs[2 * byte] = kDigits[byte >> 4];
    pairs[2 * byte + 1] = kDigits[byte & 15];
  }
  return pairs;
}();
}  // namespace detail

// Writes the 2 * n digits of bytes[0, n) to out; returns one past the last.
inline char* writeHex(char* out, const unsigned char* bytes, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i, out += 2)
    std::memcpy(out, &detail::kHexPairs[2 * bytes[i]], 2);
  return out;
}

// Writes the `digits` low-order hex digits of `bits` (at most 16, an even
// number), most significant first; returns one past the last.
inline char* writeHexWord(char* out, std::uint64_t bits, int digits = 16) {
  for (int shift = (digits - 2) * 4; shift >= 0; shift -= 8, out += 2)
    std::memcpy(out, &detail::kHexPairs[2 * ((bits >> shift) & 0xff)], 2);
  return out;
}

// The 2 * n digits of bytes[0, n).
inline std::string toHexString(const unsigned char* bytes, std::size_t n) {
  std::string out(2 * n, '0');
  writeHex(out.data(), bytes, n);
  return out;
}

}  // namespace relay
