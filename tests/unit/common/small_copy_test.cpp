// copySmall (relay/common/small_copy.hpp): every length from 0 to past the
// word paths copies exactly its bytes, in order, and writes nothing before or
// after them.
#include "relay/common/small_copy.hpp"

#include <string>

#include <gtest/gtest.h>

namespace relay {
namespace {

TEST(CopySmall, EveryLengthCopiesExactlyItsBytes) {
  std::string source;
  for (int i = 0; i < 64; ++i)
    source += static_cast<char>('A' + i % 26 + (i / 26) * 32 % 64);
  for (std::size_t n = 0; n <= 40; ++n) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{3}}) {  // unaligned too
      std::string target(8 + n + 8, '#');
      copySmall(target.data() + 8, source.data() + offset, n);
      EXPECT_EQ(target.substr(0, 8), std::string(8, '#')) << "wrote before, n=" << n;
      EXPECT_EQ(target.substr(8, n), source.substr(offset, n)) << "n=" << n;
      EXPECT_EQ(target.substr(8 + n), std::string(8, '#')) << "wrote after, n=" << n;
    }
  }
}

TEST(CopySmall, ZeroBytesTouchesNothingAndReadsNothing) {
  char target = '#';
  copySmall(&target, nullptr, 0);  // HeadWriter passes empty views' (null) data
  EXPECT_EQ(target, '#');
}

}  // namespace
}  // namespace relay
