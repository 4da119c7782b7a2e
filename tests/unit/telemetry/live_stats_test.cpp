#include "relay/telemetry/live_stats.hpp"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "relay/telemetry/sliding_sum.hpp"

namespace relay::telemetry {
namespace {

TEST(SlidingSum, CountsTheWindowAndForgetsWhatLeftIt) {
  SlidingSum<12, 5'000> s;
  const std::int64_t t0 = 1'000'000;
  s.add(3, t0);
  s.add(2, t0 + 4'000);
  EXPECT_EQ(s.sum(t0 + 4'000), 5u);
  s.add(1, t0 + 30'000);
  EXPECT_EQ(s.sum(t0 + 30'000), 6u);
  // 55-60 s later the first slice has left the window; the rest is still in.
  EXPECT_EQ(s.sum(t0 + 60'000), 1u);
  EXPECT_EQ(s.sum(t0 + 95'000), 0u);
  // A slice reused a window later starts from zero.
  s.add(7, t0 + 120'000);
  EXPECT_EQ(s.sum(t0 + 120'000), 7u);
}

RequestRecord request(int status, std::int64_t durationUs, std::int64_t ttftUs = -1) {
  RequestRecord r;
  r.status = status;
  r.durationUs = durationUs;
  r.ttftUs = ttftUs;
  r.usage = {100, 0, 20};
  return r;
}

TEST(LiveStats, PerKeyUpstreamAndNodeFiguresOfTheLastMinute) {
  LiveStats live;
  const std::int64_t now = 5'000'000;
  LiveCells a = live.cells("team-a", "moonshot", "planner-1");
  LiveCells b = live.cells("team-b", "", "none");
  EXPECT_EQ(b.upstream, nullptr);
  for (int i = 1; i <= 100; ++i)
    live.record(a, request(200, i * 1000, i * 100), Cost{1'000'000}, now);
  live.record(b, request(401, 500), Cost{}, now);

  KeyLive ka = live.key("team-a", now);
  EXPECT_EQ(ka.requestsLastMinute, 100u);
  EXPECT_EQ(ka.tokensLastMinute, 100u * 120);
  EXPECT_EQ(live.key("team-b", now).requestsLastMinute, 1u);
  EXPECT_EQ(live.key("unknown", now).requestsLastMinute, 0u);
  EXPECT_EQ(live.key("team-a", now + 61'000).requestsLastMinute, 0u) << "a minute later";
  EXPECT_EQ(live.key("team-a", now + 61'000).requestsTotal, 100u);

  live.attempt(a.upstream, false, now);
  live.attempt(a.upstream, true, now);
  UpstreamLive u = live.upstream("moonshot", now);
  EXPECT_EQ(u.requestsLastMinute, 100u);
  EXPECT_EQ(u.attemptsLastMinute, 2u);
  EXPECT_EQ(u.failedAttemptsLastMinute, 1u);
  EXPECT_EQ(u.costTotal.picoUsd, 100'000'000u);
  EXPECT_EQ(u.costLastHour.picoUsd, 100'000'000u);
  // 1..100 ms: nearest-rank p50 = 50 ms, p99 = 99 ms (within the bins' 1.6 %).
  EXPECT_NEAR(u.latency.p50, 50, 1);
  EXPECT_NEAR(u.latency.p95, 95, 2);
  EXPECT_NEAR(u.latency.p99, 99, 2);
  EXPECT_NEAR(u.ttft.p50, 5, 0.1);
  EXPECT_TRUE(std::isnan(live.upstream("nobody", now).latency.p50));

  auto nodes = live.nodes(now);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].node, "none");
  EXPECT_EQ(nodes[0].requestsTotal, 1u);
  EXPECT_EQ(nodes[1].node, "planner-1");
  EXPECT_EQ(nodes[1].requestsLastMinute, 100u);
  EXPECT_NEAR(nodes[1].latency.p95, 95, 2);
  EXPECT_TRUE(std::isnan(nodes[0].ttft.p50)) << "no stream: no time to first token";
}

TEST(LiveStats, CellsAreCappedAndEmptyNamesGetNone) {
  LiveStats live;
  EXPECT_EQ(live.cells("", "", "").key, nullptr);
  for (std::size_t i = 0; i < LiveStats::kMaxNodes; ++i)
    EXPECT_NE(live.cells("", "", "n" + std::to_string(i)).node, nullptr);
  EXPECT_EQ(live.cells("", "", "one-too-many").node, nullptr);
  EXPECT_NE(live.cells("", "", "n0").node, nullptr) << "known names keep their cell";
  EXPECT_EQ(live.nodes(0).size(), LiveStats::kMaxNodes);
}

TEST(LiveStats, HistoryIsARingOfTenSecondSamples) {
  LiveStats live;
  LiveCells c = live.cells("k", "u", "none");
  std::int64_t now = 1'000'000;
  const std::int64_t unix0 = 1'700'000'000'000;
  live.record(c, request(200, 2'000), Cost{5}, now);
  live.record(c, request(503, 4'000), Cost{}, now);
  live.sampleIfDue(unix0, now);
  live.sampleIfDue(unix0 + 3'000, now + 3'000);  // not due yet
  auto h = live.history();
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].unixMs, unix0);
  EXPECT_EQ(h[0].requests, 2u);
  EXPECT_EQ(h[0].errors, 1u);
  EXPECT_EQ(h[0].spend.picoUsd, 5u);
  EXPECT_NEAR(h[0].latency.p99, 4, 0.1);

  for (std::size_t i = 1; i < LiveStats::kHistoryPoints + 40; ++i) {
    now += LiveStats::kSampleMs;
    live.sampleIfDue(unix0 + static_cast<std::int64_t>(i) * 10'000, now);
  }
  h = live.history();
  ASSERT_EQ(h.size(), LiveStats::kHistoryPoints) << "bounded";
  EXPECT_EQ(h.front().unixMs, unix0 + 40 * 10'000) << "the oldest went first";
  for (std::size_t i = 1; i < h.size(); ++i)
    EXPECT_EQ(h[i].unixMs - h[i - 1].unixMs, 10'000);
  EXPECT_TRUE(std::isnan(h.back().latency.p50)) << "nothing in the last minute";
  EXPECT_EQ(h.back().requests, 2u) << "counts are cumulative";
}

}  // namespace
}  // namespace relay::telemetry
