// SipHash-2-4 against the reference implementation's vectors (key 00 01 ..
// 0f, message 00 01 .. of growing length).
#include "relay/common/siphash.hpp"

#include <string>

#include <gtest/gtest.h>

namespace relay {
namespace {

constexpr std::uint64_t kK0 = 0x0706050403020100ULL;
constexpr std::uint64_t kK1 = 0x0f0e0d0c0b0a0908ULL;

std::string message(std::size_t length) {
  std::string m;
  for (std::size_t i = 0; i < length; ++i)
    m.push_back(static_cast<char>(i));
  return m;
}

// The output bytes in order, as the reference prints them.
std::string bytesOf(std::uint64_t word) {
  std::string out;
  for (int i = 0; i < 8; ++i) {
    static constexpr char kHex[] = "0123456789abcdef";
    const auto b = static_cast<unsigned>((word >> (8 * i)) & 0xff);
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

TEST(SipHash, MatchesTheReference64BitVectors) {
  EXPECT_EQ(bytesOf(siphash24(kK0, kK1, message(0))), "310e0edd47db6f72");
  EXPECT_EQ(bytesOf(siphash24(kK0, kK1, message(1))), "fd67dc93c539f874");
  EXPECT_EQ(bytesOf(siphash24(kK0, kK1, message(2))), "5a4fa9d909806c0d");
}

TEST(SipHash, MatchesTheReference128BitVectors) {
  const char* const want[] = {
      "a3817f04ba25a8e66df67214c7550293",
      "da87c1d86b99af44347659119b22fc45",
      "8177228da4a45dc7fca38bdef60affe4",
      "9c70b60c5267a94e5f33b6b02985ed51",
  };
  for (std::size_t length = 0; length < 4; ++length) {
    const auto h = siphash24x128(kK0, kK1, message(length));
    EXPECT_EQ(bytesOf(h[0]) + bytesOf(h[1]), want[length]) << "length " << length;
  }
}

TEST(SipHash, EveryLengthAroundAWordGivesItsOwnValue) {
  // Lengths 0..24 cover empty input, tails of 1..7 bytes and whole words;
  // a message and its one-byte extension by a zero must not collide.
  for (std::size_t length = 0; length < 24; ++length) {
    const auto a = siphash24x128(kK0, kK1, message(length));
    std::string longer = message(length);
    longer.push_back('\0');
    const auto b = siphash24x128(kK0, kK1, longer);
    EXPECT_NE(a, b) << "length " << length;
    EXPECT_NE(a, siphash24x128(kK0 ^ 1, kK1, message(length))) << "length " << length;
  }
}

}  // namespace
}  // namespace relay
