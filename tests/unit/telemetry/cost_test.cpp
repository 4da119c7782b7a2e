#include "relay/telemetry/cost.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "telemetry_test_support.hpp"

namespace relay::telemetry {
namespace {

std::string usd(Cost c) {
  std::string s;
  appendUsd(s, c);
  return s;
}

std::string converted(Cost c, double rate) {
  std::string s;
  appendConverted(s, c, rate);
  return s;
}

TEST(Cost, PricesBecomeExactMicroUsdPerMillion) {
  EXPECT_EQ(microUsdPerMillion(0.60), 600'000u);
  EXPECT_EQ(microUsdPerMillion(0.15), 150'000u);
  EXPECT_EQ(microUsdPerMillion(2.50), 2'500'000u);
  EXPECT_EQ(microUsdPerMillion(0.000001), 1u);
  EXPECT_EQ(microUsdPerMillion(0.0000004), 0u);  // below the resolution
  EXPECT_EQ(microUsdPerMillion(-1), 0u);
  EXPECT_EQ(microUsdPerMillion(std::nan("")), 0u);
  EXPECT_EQ(microUsdPerMillion(std::numeric_limits<double>::infinity()), 0u);
}

TEST(Cost, CachedTokensAtCachedPriceRestOfPromptAtInput) {
  const Price p{600'000, 150'000, 2'500'000};  // 0.60 / 0.15 / 2.50 per 1M
  // 1000 prompt of which 200 cached, 50 completion:
  // 800 × 0.6 + 200 × 0.15 + 50 × 2.5 = 480 + 30 + 125 = 635 µUSD.
  EXPECT_EQ(costOf(p, {1000, 200, 50}).picoUsd, 635'000'000u);
  EXPECT_EQ(usd(costOf(p, {1000, 200, 50})), "0.000635");
  // Without cached tokens the whole prompt is input.
  EXPECT_EQ(costOf(p, {1000, 0, 0}).picoUsd, 600'000'000u);
  // One token at 0.15 per 1M is 0.15 µUSD: kept, not rounded away.
  EXPECT_EQ(costOf(p, {1, 1, 0}).picoUsd, 150'000u);
}

TEST(Cost, BadCountsAreClampedNotNegative) {
  const Price p{600'000, 150'000, 2'500'000};
  EXPECT_EQ(costOf(p, {100, 500, 0}), costOf(p, {100, 100, 0}));  // cached ≤ prompt
  EXPECT_EQ(costOf(p, {-5, -1, -7}).picoUsd, 0u);
  const Cost huge = costOf(Price{~0ULL, 0, ~0ULL}, {std::numeric_limits<std::int64_t>::max(), 0,
                                                    std::numeric_limits<std::int64_t>::max()});
  EXPECT_EQ(huge.picoUsd, std::numeric_limits<std::uint64_t>::max());  // saturates
}

TEST(PriceTable, UpstreamRowWinsOverModelWideRow) {
  const PriceTable t(test::makeConfig().prices);
  ASSERT_NE(t.find("kimi-k2", "holysheep"), nullptr);
  EXPECT_EQ(*t.find("kimi-k2", "holysheep"), (Price{500'000, 120'000, 2'000'000}));
  // moonshot has no row of its own: the model-wide row.
  ASSERT_NE(t.find("kimi-k2", "moonshot"), nullptr);
  EXPECT_EQ(*t.find("kimi-k2", "moonshot"), (Price{600'000, 150'000, 2'500'000}));
  EXPECT_EQ(*t.find("kimi-k2", ""), (Price{600'000, 150'000, 2'500'000}));
}

TEST(PriceTable, MissingPriceIsNull) {
  const PriceTable t(test::makeConfig().prices);
  EXPECT_EQ(t.find("moonshot-v1-8k", "moonshot"), nullptr);
  EXPECT_EQ(t.find("nope", ""), nullptr);
  EXPECT_EQ(t.find("kimi-k", "holysheep"), nullptr);  // no prefix matching
  EXPECT_EQ(PriceTable().find("kimi-k2", "holysheep"), nullptr);
}

TEST(PriceTable, UpstreamOnlyRowDoesNotPriceOtherUpstreams) {
  const PriceTable t({config::Price{"m", "a", 1, 1, 1}});
  EXPECT_NE(t.find("m", "a"), nullptr);
  EXPECT_EQ(t.find("m", "b"), nullptr);
  EXPECT_EQ(t.find("m", ""), nullptr);
}

TEST(PriceTable, FirstOfDuplicateRowsWins) {
  const PriceTable t({config::Price{"m", "", 1, 1, 1}, config::Price{"m", "", 2, 2, 2}});
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.find("m", "x")->inputMicroUsd, 1'000'000u);
}

// 10,000 small requests: the integer sum is the exact decimal, where adding
// doubles drifts. 0.0000105 USD each (7 output tokens at 1.50 per 1M) sums to
// exactly 0.105 USD — a half cent, where any drift flips the rounded cent.
TEST(Cost, TenThousandSmallRequestsSumExactlyToTheCent) {
  const Price p = {0, 0, microUsdPerMillion(1.50)};
  Cost total;
  double naive = 0;
  for (int i = 0; i < 10'000; ++i) {
    const Cost c = costOf(p, {0, 0, 7});
    total += c;
    naive += 7 * 1.50 / 1e6;
  }
  EXPECT_EQ(total.picoUsd, 105'000'000'000u);
  EXPECT_EQ(usd(total), "0.105");
  // Half-up to the cent from the exact integer: 11 cents.
  EXPECT_EQ((total.picoUsd + 5'000'000'000u) / 10'000'000'000u, 11u);
  // The double sum is not exact (why this module uses integers).
  EXPECT_NE(naive, 0.105);
}

TEST(Cost, MixedRequestsSumExactly) {
  const PriceTable t(test::makeConfig().prices);
  Cost total;
  for (int i = 0; i < 10'000; ++i) {
    const bool hs = i % 2 == 0;
    total += costOf(*t.find("kimi-k2", hs ? "holysheep" : "moonshot"), {1234, 200, 567});
  }
  // holysheep: 1034×0.50 + 200×0.12 + 567×2.00 = 517 + 24 + 1134 = 1675 µUSD
  // moonshot : 1034×0.60 + 200×0.15 + 567×2.50 = 620.4 + 30 + 1417.5 = 2067.9 µUSD
  // 5000 × (1675 + 2067.9) µUSD = 18.7145 USD
  EXPECT_EQ(usd(total), "18.7145");
}

TEST(Cost, UsdTextIsTheExactDecimal) {
  EXPECT_EQ(usd(Cost{0}), "0");
  EXPECT_EQ(usd(Cost{1}), "0.000000000001");
  EXPECT_EQ(usd(Cost{1'000'000'000'000}), "1");
  EXPECT_EQ(usd(Cost{12'500'000'000'000}), "12.5");
  EXPECT_EQ(usd(Cost{std::numeric_limits<std::uint64_t>::max()}), "18446744.073709551615");
}

TEST(Cost, DisplayCurrencyConvertsForTheLogOnly) {
  EXPECT_EQ(converted(Cost{1'000'000'000'000}, 7.3), "7.3");
  EXPECT_EQ(converted(Cost{635'000'000}, 7.3), "0.0046355");
  EXPECT_EQ(converted(Cost{635'000'000}, 1.0), "0.000635");
  EXPECT_EQ(converted(Cost{1}, 7.3), "0");  // below 1e-8
  EXPECT_EQ(converted(Cost{1'000'000'000'000}, -2), "0");
  EXPECT_TRUE(DisplayCurrency().isUsd());
  EXPECT_FALSE(DisplayCurrency(config::Currency{"CNY", 7.3}).isUsd());
  EXPECT_FALSE(DisplayCurrency(config::Currency{"USD", 0.5}).isUsd());
}

}  // namespace
}  // namespace relay::telemetry
