// SipHash-2-4 (Aumasson & Bernstein): a keyed hash, so that whoever chooses
// the input cannot aim it at one slot of a table. The 64-bit form, and the
// 128-bit form in one pass over the input (for a cache keyed by the hash
// alone, where 64 bits would leave collisions within reach).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace relay {

namespace detail {

struct SipState {
  std::uint64_t v0, v1, v2, v3;

  SipState(std::uint64_t k0, std::uint64_t k1, bool wide)
      : v0(0x736f6d6570736575ULL ^ k0),
        v1(0x646f72616e646f6dULL ^ k1 ^ (wide ? 0xee : 0)),
        v2(0x6c7967656e657261ULL ^ k0),
        v3(0x7465646279746573ULL ^ k1) {}

  static std::uint64_t rotl(std::uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }

  void block(std::uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }

  // Every 8-byte word of `in` (little-endian), then the last one: the tail
  // bytes and the length in its top byte.
  void compress(std::string_view in) {
    const std::size_t n = in.size();
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t m;
      std::memcpy(&m, in.data() + i, 8);
      block(m);
    }
    std::uint64_t last = static_cast<std::uint64_t>(n) << 56;
    for (std::size_t j = 0; i + j < n; ++j)
      last |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[i + j])) << (8 * j);
    block(last);
  }

  std::uint64_t finish() {
    for (int r = 0; r < 4; ++r)
      round();
    return v0 ^ v1 ^ v2 ^ v3;
  }
};

}  // namespace detail

inline std::uint64_t siphash24(std::uint64_t k0, std::uint64_t k1, std::string_view in) {
  detail::SipState s(k0, k1, false);
  s.compress(in);
  s.v2 ^= 0xff;
  return s.finish();
}

// The 128-bit output as two words: the first eight output bytes
// (little-endian) and the last eight.
inline std::array<std::uint64_t, 2> siphash24x128(std::uint64_t k0, std::uint64_t k1,
                                                  std::string_view in) {
  detail::SipState s(k0, k1, true);
  s.compress(in);
  s.v2 ^= 0xee;
  const std::uint64_t first = s.finish();
  s.v1 ^= 0xdd;
  return {first, s.finish()};
}

}  // namespace relay
