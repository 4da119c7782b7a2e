// The latency histograms behind the *_seconds histogram families (an internal
// class of the module, so included from src/).
#include "../../../src/telemetry/histogram.hpp"

#include <limits>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "relay/telemetry/metrics.hpp"

namespace relay::telemetry::detail {
namespace {

// What prometheus::Histogram does with an observation of `us` microseconds:
// the first bound b with us / 1e6 <= b.
std::size_t reference(const std::vector<double>& bounds, std::uint64_t us) {
  const double s = static_cast<double>(us) / 1e6;
  std::size_t i = 0;
  while (i < bounds.size() && s > bounds[i])
    ++i;
  return i;
}

TEST(LatencyHistogram, EveryObservationLandsWherePrometheusWouldPutIt) {
  for (const std::vector<double>& seconds : {latencyBuckets(), overheadBuckets()}) {
    const HistogramBounds bounds(seconds);
    for (double b : seconds) {
      // Around each bound (12.5 µs is no whole number of microseconds).
      const auto u = static_cast<std::uint64_t>(b * 1e6);
      for (std::uint64_t us = u > 2 ? u - 2 : 0; us <= u + 2; ++us)
        ASSERT_EQ(bounds.bucketOf(us), reference(seconds, us)) << b << " " << us;
    }
    ASSERT_EQ(bounds.bucketOf(0), 0u);
    ASSERT_EQ(bounds.bucketOf(std::numeric_limits<std::uint64_t>::max()), seconds.size());
  }
}

TEST(LatencyHistogram, ExposesCumulativeBucketsAndAnExactSum) {
  HistogramFamily family("t_seconds", "help", {0.001, 0.0025, 1});
  LatencyHistogram& h = family.add({{"model", "m"}});
  EXPECT_EQ(&family.add({{"model", "m"}}), &h);  // one series per label set
  for (std::uint64_t us : {0, 1000, 1001, 2500, 2501, 1'000'000, 1'000'001, 7})
    h.observe(us);
  family.add({{"model", "a"}}).observe(3);
  const prometheus::MetricFamily f = family.collect();
  EXPECT_EQ(f.type, prometheus::MetricType::Histogram);
  ASSERT_EQ(f.metric.size(), 2u);
  EXPECT_EQ(f.metric[0].label[0].value, "a");  // sorted by labels
  const auto& m = f.metric[1].histogram;
  ASSERT_EQ(m.bucket.size(), 4u);
  EXPECT_EQ(m.bucket[0].cumulative_count, 3u);  // 0, 7, 1000
  EXPECT_EQ(m.bucket[1].cumulative_count, 5u);  // + 1001, 2500
  EXPECT_EQ(m.bucket[2].cumulative_count, 7u);  // + 2501, 1 s
  EXPECT_EQ(m.bucket[3].cumulative_count, 8u);  // + 1 s + 1 µs
  EXPECT_EQ(m.bucket[3].upper_bound, std::numeric_limits<double>::infinity());
  EXPECT_EQ(m.sample_count, 8u);
  EXPECT_DOUBLE_EQ(m.sample_sum, 2'007'010 / 1e6);
}

TEST(LatencyHistogram, CountsEveryObservationOfParallelWriters) {
  HistogramFamily family("t_seconds", "help", latencyBuckets());
  LatencyHistogram& h = family.add({});
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&h, t] {
      for (std::uint64_t i = 0; i < 100'000; ++i)
        h.observe(i % 5000 + static_cast<std::uint64_t>(t));
    });
  }
  for (auto& w : writers)
    w.join();
  const auto m = family.collect().metric.at(0).histogram;
  EXPECT_EQ(m.sample_count, 400'000u);
  std::uint64_t sum = 0;
  for (int t = 0; t < 4; ++t)
    for (std::uint64_t i = 0; i < 100'000; ++i)
      sum += i % 5000 + static_cast<std::uint64_t>(t);
  EXPECT_DOUBLE_EQ(m.sample_sum, static_cast<double>(sum) / 1e6);
}

}  // namespace
}  // namespace relay::telemetry::detail
