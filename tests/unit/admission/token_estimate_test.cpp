#include "relay/admission/token_estimate.hpp"

#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace relay::admission {
namespace {

TEST(TokenEstimate, BytesOverFourRoundedUpPlusMessageOverhead) {
  EXPECT_EQ(estimatePromptTokens(0, 0), 3u);  // reply priming only
  EXPECT_EQ(estimatePromptTokens(1, 1), 1u + 3 + 3);
  EXPECT_EQ(estimatePromptTokens(4, 1), 1u + 3 + 3);
  EXPECT_EQ(estimatePromptTokens(5, 1), 2u + 3 + 3);
  EXPECT_EQ(estimatePromptTokens(4'000, 10), 1'000u + 30 + 3);
  EXPECT_EQ(estimatePromptTokens(4'000), 1'000u + 3 + 3);  // count unknown: one message
}

TEST(TokenEstimate, SaturatesOnAbsurdInputs) {
  constexpr auto kMax = std::numeric_limits<std::size_t>::max();
  EXPECT_EQ(estimatePromptTokens(kMax, kMax), std::numeric_limits<std::uint64_t>::max());
}

TEST(TokenEstimate, ReservationUsesTheCompletionCapTheRequestGives) {
  EXPECT_EQ(reservationFor(100, std::nullopt, std::nullopt, 4'096), 4'196u);
  EXPECT_EQ(reservationFor(100, 500, std::nullopt, 4'096), 600u);
  EXPECT_EQ(reservationFor(100, std::nullopt, 700, 4'096), 800u);
  EXPECT_EQ(reservationFor(100, 500, 700, 4'096), 800u);  // both: the larger
  EXPECT_EQ(reservationFor(100, 900, 700, 4'096), 1'000u);
  EXPECT_EQ(reservationFor(100, 0, std::nullopt, 4'096), 100u);     // an explicit 0 is a cap
  EXPECT_EQ(reservationFor(100, -1, std::nullopt, 4'096), 4'196u);  // invalid = absent
  EXPECT_EQ(reservationFor(std::numeric_limits<std::uint64_t>::max(), 10, std::nullopt, 0),
            std::numeric_limits<std::uint64_t>::max());
}

}  // namespace
}  // namespace relay::admission
