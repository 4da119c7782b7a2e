// The sliding-window quantile estimator behind the *_window_seconds summaries
// (an internal class of the module, so included from src/).
#include "../../../src/telemetry/window_quantiles.hpp"

#include <cmath>

#include <gtest/gtest.h>

namespace relay::telemetry::detail {
namespace {

double quantile(const WindowQuantiles& w, double q, std::int64_t nowMs) {
  double qs[] = {q}, out[] = {0};
  w.quantiles(qs, nowMs, out);
  return out[0];
}

TEST(WindowQuantiles, BinsAreOrderedAndNarrow) {
  std::size_t last = 0;
  for (std::uint64_t v = 0; v < (1ULL << 31); v = v < 1000 ? v + 1 : v + v / 97) {
    const std::size_t bin = WindowQuantiles::binOf(v);
    ASSERT_LT(bin, WindowQuantiles::kBins);
    ASSERT_GE(bin, last) << v;
    last = bin;
    // The bin's middle is within 1.6 % of every value in it (exact below 64 µs).
    const double mid = WindowQuantiles::binMiddleMicros(bin);
    if (v < 64) {
      ASSERT_EQ(mid, static_cast<double>(v));
    } else {
      ASSERT_LE(std::abs(mid - static_cast<double>(v)) / static_cast<double>(v), 0.016) << v;
    }
  }
  EXPECT_EQ(WindowQuantiles::binOf(~0ULL), WindowQuantiles::kBins - 1);  // clamped, not wrapped
}

TEST(WindowQuantiles, EmptyWindowIsNaN) {
  WindowQuantiles w;
  EXPECT_TRUE(std::isnan(quantile(w, 0.5, 0)));
}

TEST(WindowQuantiles, NearestRank) {
  WindowQuantiles w;
  for (std::uint64_t v : {10, 20, 30, 40, 50})
    w.observe(v, 1'000);
  EXPECT_EQ(quantile(w, 0.5, 1'000), 30e-6);
  EXPECT_EQ(quantile(w, 0.2, 1'000), 10e-6);
  EXPECT_EQ(quantile(w, 0.99, 1'000), 50e-6);
  EXPECT_EQ(quantile(w, 0.0, 1'000), 10e-6);
  EXPECT_EQ(w.count(), 5u);
  EXPECT_EQ(w.sumMicros(), 150u);
}

TEST(WindowQuantiles, SamplesAgeOutAfterFiftyToSixtySeconds) {
  WindowQuantiles w;
  w.observe(1'000'000, 0);  // 1 s, in period 0
  w.observe(50, 13'000);    // 50 µs, in period 1
  EXPECT_NEAR(quantile(w, 0.99, 13'000), 1.0, 0.016);
  EXPECT_NEAR(quantile(w, 0.99, 59'999), 1.0, 0.016);  // period 4: 0..4 are live
  EXPECT_EQ(quantile(w, 0.99, 60'000), 50e-6);         // period 5: period 0 is out
  EXPECT_TRUE(std::isnan(quantile(w, 0.99, 72'000)));  // period 6: all out
  // The slice of period 0 is reused for period 5, starting from zero.
  w.observe(60, 61'000);
  EXPECT_EQ(quantile(w, 0.99, 61'000), 60e-6);
  EXPECT_EQ(quantile(w, 0.5, 61'000), 50e-6);
  EXPECT_EQ(w.count(), 3u);  // _count keeps everything
}

}  // namespace
}  // namespace relay::telemetry::detail
