#include "relay/upstream/selector.hpp"

#include <array>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace relay::upstream {
namespace {

std::vector<int> picks(SmoothWeightedSelector& s, int n, std::span<const bool> eligible = {}) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i)
    out.push_back(s.pick(eligible));
  return out;
}

std::map<int, int> counts(const std::vector<int>& seq) {
  std::map<int, int> c;
  for (int p : seq)
    ++c[p];
  return c;
}

TEST(SmoothWeightedSelector, EveryWindowOfTotalWeightPicksEachCandidateWeightTimes) {
  const std::vector<std::uint32_t> weights = {5, 3, 1, 2};
  SmoothWeightedSelector s(weights);
  const int total = 11;
  // Not only the first window: the state returns to zero after each one.
  for (int window = 0; window < 4; ++window) {
    const auto c = counts(picks(s, total));
    EXPECT_EQ(c, (std::map<int, int>{{0, 5}, {1, 3}, {2, 1}, {3, 2}})) << "window " << window;
  }
}

TEST(SmoothWeightedSelector, InterleavesInsteadOfBunching) {
  // The classic nginx example: weights 5,1,1 give a a b a c a a, not a a a a a b c.
  SmoothWeightedSelector s({5, 1, 1});
  EXPECT_EQ(picks(s, 7), (std::vector<int>{0, 0, 1, 0, 2, 0, 0}));
  EXPECT_EQ(picks(s, 7), (std::vector<int>{0, 0, 1, 0, 2, 0, 0}));
}

TEST(SmoothWeightedSelector, EqualWeightsAlternate) {
  SmoothWeightedSelector s({1, 1, 1});
  EXPECT_EQ(picks(s, 6), (std::vector<int>{0, 1, 2, 0, 1, 2}));
}

TEST(SmoothWeightedSelector, SeventyThirtyOverThreeHundredPicksIsExact) {
  SmoothWeightedSelector s({70, 30});
  const auto seq = picks(s, 300);
  const auto c = counts(seq);
  EXPECT_EQ(c.at(0), 210);
  EXPECT_EQ(c.at(1), 90);
  // Smoothness: the minority candidate never waits more than ceil(100/30) picks.
  int sinceLast = 0;
  int longestGap = 0;
  for (int p : seq) {
    sinceLast = p == 1 ? 0 : sinceLast + 1;
    longestGap = std::max(longestGap, sinceLast);
  }
  EXPECT_LE(longestGap, 3);
}

TEST(SmoothWeightedSelector, IneligibleCandidatesAreSkippedAndOthersKeepTheirProportions) {
  SmoothWeightedSelector s({2, 5, 1});
  const std::array<bool, 3> eligible = {true, false, true};
  const auto seq = picks(s, 30, eligible);
  const auto c = counts(seq);
  EXPECT_EQ(c.count(1), 0u);
  EXPECT_EQ(c.at(0), 20);
  EXPECT_EQ(c.at(2), 10);
}

TEST(SmoothWeightedSelector, NoEligibleCandidateGivesMinusOne) {
  SmoothWeightedSelector s({1, 1});
  const std::array<bool, 2> none = {false, false};
  EXPECT_EQ(s.pick(none), -1);
  SmoothWeightedSelector empty(std::vector<std::uint32_t>{});
  EXPECT_EQ(empty.pick(), -1);
}

TEST(SmoothWeightedSelector, ACandidateComingBackIsNotFloodedWithCatchUpPicks) {
  // A candidate that sat out does not accumulate credit, so when it becomes
  // eligible again it gets its share, not a burst to make up for lost time.
  SmoothWeightedSelector s({1, 1});
  const std::array<bool, 2> onlyFirst = {true, false};
  picks(s, 50, onlyFirst);
  const auto c = counts(picks(s, 10));
  EXPECT_EQ(c.at(0), 5);
  EXPECT_EQ(c.at(1), 5);
}

}  // namespace
}  // namespace relay::upstream
