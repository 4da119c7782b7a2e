#include "relay/upstream/backoff.hpp"

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace relay::upstream {
namespace {

constexpr std::uint64_t kAllOnes = std::numeric_limits<std::uint64_t>::max();

TEST(Backoff, CeilingDoublesFromBaseAndStopsAtMax) {
  const BackoffOptions o{Millis(100), Millis(8'000)};
  const std::vector<std::int64_t> expected = {100, 200, 400, 800, 1600, 3200, 6400, 8000, 8000};
  for (unsigned k = 0; k < expected.size(); ++k) {
    EXPECT_EQ(backoffCeiling(o, k).count(), expected[k]) << "retry " << k;
  }
}

TEST(Backoff, CeilingNeverOverflowsForHugeRetryCounts) {
  const BackoffOptions o{Millis(100), Millis(8'000)};
  EXPECT_EQ(backoffCeiling(o, 64).count(), 8'000);
  EXPECT_EQ(backoffCeiling(o, 1'000'000).count(), 8'000);
  const BackoffOptions wide{Millis(1), Millis(std::numeric_limits<std::int64_t>::max() / 4)};
  EXPECT_EQ(backoffCeiling(wide, 200), wide.max);
}

TEST(Backoff, BaseAboveMaxIsCappedAndZeroBaseNeverWaits) {
  EXPECT_EQ(backoffCeiling({Millis(500), Millis(300)}, 0).count(), 300);
  EXPECT_EQ(backoffCeiling({Millis(0), Millis(300)}, 5).count(), 0);
  EXPECT_EQ(backoffDelay({Millis(0), Millis(300)}, 5, kAllOnes).count(), 0);
}

TEST(Backoff, FullJitterSpansZeroToCeilingInclusive) {
  EXPECT_EQ(fullJitter(Millis(800), 0).count(), 0);
  EXPECT_EQ(fullJitter(Millis(800), kAllOnes).count(), 800);
  EXPECT_EQ(fullJitter(Millis(800), kAllOnes / 2).count(), 400);
  EXPECT_EQ(fullJitter(Millis(0), kAllOnes).count(), 0);
}

TEST(Backoff, SeededDelaysStayWithinTheirCeilingAndRepeat) {
  const BackoffOptions o{Millis(100), Millis(8'000)};
  std::mt19937_64 a(42);
  std::mt19937_64 b(42);
  for (unsigned k = 0; k < 12; ++k) {
    for (int i = 0; i < 1'000; ++i) {
      const Millis d = backoffDelay(o, k, a());
      ASSERT_GE(d.count(), 0);
      ASSERT_LE(d, backoffCeiling(o, k)) << "retry " << k;
      ASSERT_EQ(d, backoffDelay(o, k, b()));  // same seed, same delays
    }
  }
}

TEST(Backoff, FullJitterIsUniformNotEqualJitterOrFixed) {
  // Full jitter: the mean is half the ceiling, every tenth of the range gets
  // about a tenth of the draws, and both ends are reached. A fixed delay, or
  // "equal jitter" (ceiling/2 + uniform(0, ceiling/2)), fails these.
  std::mt19937_64 rng(7);
  const Millis ceiling(999);
  constexpr int kDraws = 200'000;
  std::vector<int> deciles(10, 0);
  double sum = 0;
  bool sawZero = false;
  bool sawCeiling = false;
  for (int i = 0; i < kDraws; ++i) {
    const auto d = fullJitter(ceiling, rng()).count();
    sum += static_cast<double>(d);
    ++deciles[static_cast<std::size_t>(d / 100)];
    sawZero |= d == 0;
    sawCeiling |= d == 999;
  }
  EXPECT_NEAR(sum / kDraws, 499.5, 3.0);
  for (int count : deciles)
    EXPECT_NEAR(count, kDraws / 10, kDraws / 100);
  EXPECT_TRUE(sawZero);
  EXPECT_TRUE(sawCeiling);
}

}  // namespace
}  // namespace relay::upstream
