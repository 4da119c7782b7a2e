#include "relay/telemetry/metrics.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>

#include <gtest/gtest.h>

#include "relay/telemetry/telemetry.hpp"
#include "telemetry_test_support.hpp"

namespace relay::telemetry {
namespace {

using test::sample;

RequestRecord ok(std::string_view key, std::uint32_t keyId, std::string_view model,
                 std::uint32_t modelId, std::string_view upstream, std::uint32_t upstreamId) {
  RequestRecord r;
  r.requestId = "req_1";
  r.keyName = key;
  r.keyId = keyId;
  r.model = model;
  r.modelId = modelId;
  r.upstream = upstream;
  r.upstreamId = upstreamId;
  r.status = 200;
  r.attempts = 1;
  r.protocol = Protocol::kHttp1;
  return r;
}

class MetricsTest : public ::testing::Test {
 protected:
  Metrics metrics_;
  Telemetry telemetry_{metrics_, nullptr, test::makeConfig(), {"node-1"}};

  double value(std::string_view series) {
    const auto v = sample(metrics_.expose(), series);
    EXPECT_TRUE(v.has_value()) << "no series " << series;
    return v.value_or(-1);
  }

  // A latency series summed over every node: `series` is written with
  // node=\"*\" where the node label goes.
  double overNodes(const std::string& series) {
    const std::string text = metrics_.expose();
    double total = 0;
    bool any = false;
    for (const char* node : {"none", "other", "node-1"}) {
      std::string one = series;
      const std::string marker = "node=\"*\"";
      one.replace(one.find(marker), marker.size(), std::string("node=\"") + node + "\"");
      if (auto v = sample(text, one)) {
        total += *v;
        any = true;
      }
    }
    EXPECT_TRUE(any) << "no series " << series;
    return total;
  }

  // The known traffic of the exact-value tests.
  void recordKnownTraffic() {
    RequestRecord a =
        ok("team-a", test::kTeamA, "kimi-k2", test::kKimiK2, "holysheep", test::kHolySheep);
    a.stream = true;
    a.usage = {1000, 200, 50};
    a.durationUs = 120'000;
    a.ttftUs = 30'000;
    a.upstreamUs = 100'000;
    a.overheadUs = 40;
    for (int i = 0; i < 3; ++i)
      telemetry_.record(a);

    RequestRecord b =
        ok("team-b", test::kTeamB, "kimi-k2", test::kKimiK2, "moonshot", test::kMoonshotUp);
    b.usage = {500, 0, 100};
    b.usageEstimated = true;
    b.durationUs = 2'500'000;
    b.upstreamUs = 2'400'000;
    for (int i = 0; i < 2; ++i)
      telemetry_.record(b);

    RequestRecord fallback =
        ok("team-a", test::kTeamA, "kimi-k2", test::kKimiK2, "holysheep", test::kHolySheep);
    fallback.fallbackModel = "kimi-k2-turbo";
    fallback.fallbackModelId = test::kKimiK2Turbo;
    fallback.usage = {100, 0, 10};
    fallback.durationUs = 50'000;
    telemetry_.record(fallback);

    RequestRecord unpriced = ok("team-b", test::kTeamB, "moonshot-v1-8k", test::kMoonshot8k,
                                "moonshot", test::kMoonshotUp);
    unpriced.usage = {100, 0, 10};
    unpriced.durationUs = 10'000;
    EXPECT_FALSE(telemetry_.record(unpriced).priced);

    RequestRecord noKey = ok("", kNone, "kimi-k2", kNone, "", kNone);
    noKey.status = 401;
    noKey.durationUs = 200;
    telemetry_.record(noKey);

    RequestRecord unknownModel = ok("team-a", test::kTeamA, "made-up-model", kNone, "", kNone);
    unknownModel.status = 404;
    unknownModel.durationUs = 300;
    telemetry_.record(unknownModel);

    RequestRecord limited =
        ok("team-a", test::kTeamA, "kimi-k2", test::kKimiK2, "holysheep", test::kHolySheep);
    limited.status = 429;
    limited.durationUs = 5'000;
    limited.nodeId = telemetry_.labels().nodeId("node-1");
    telemetry_.record(limited);
  }
};

TEST_F(MetricsTest, RequestCountersAreExact) {
  recordKnownTraffic();
  EXPECT_EQ(value("kimi_relay_requests_total{code=\"200\",key=\"team-a\",model=\"kimi-k2\","
                  "node=\"none\",region=\"none\",upstream=\"holysheep\"}"),
            3);
  EXPECT_EQ(value("kimi_relay_requests_total{code=\"200\",key=\"team-b\",model=\"kimi-k2\","
                  "node=\"none\",region=\"none\",upstream=\"moonshot\"}"),
            2);
  // A fallback counts under the model that served it.
  EXPECT_EQ(value("kimi_relay_requests_total{code=\"200\",key=\"team-a\",model=\"kimi-k2-turbo\","
                  "node=\"none\",region=\"none\",upstream=\"holysheep\"}"),
            1);
  EXPECT_EQ(value("kimi_relay_requests_total{code=\"401\",key=\"none\",model=\"kimi-k2\","
                  "node=\"none\",region=\"none\",upstream=\"none\"}"),
            1);
  // A model the config does not serve never becomes a label value.
  EXPECT_EQ(value("kimi_relay_requests_total{code=\"404\",key=\"team-a\",model=\"none\","
                  "node=\"none\",region=\"none\",upstream=\"none\"}"),
            1);
  EXPECT_EQ(metrics_.expose().find("made-up-model"), std::string::npos);
  EXPECT_EQ(value("kimi_relay_requests_total{code=\"429\",key=\"team-a\",model=\"kimi-k2\","
                  "node=\"node-1\",region=\"none\",upstream=\"holysheep\"}"),
            1);
}

TEST_F(MetricsTest, TokensCostAndEstimatesAreExact) {
  recordKnownTraffic();
  const std::string a = "key=\"team-a\",model=\"kimi-k2\",node=\"none\",upstream=\"holysheep\"}";
  EXPECT_EQ(value("kimi_relay_tokens_total{direction=\"input\"," + a), 2400);
  EXPECT_EQ(value("kimi_relay_tokens_total{direction=\"cached\"," + a), 600);
  EXPECT_EQ(value("kimi_relay_tokens_total{direction=\"output\"," + a), 150);
  // 3 × (800 × 0.50 + 200 × 0.12 + 50 × 2.00) µUSD (holysheep's own row).
  EXPECT_EQ(value("kimi_relay_cost_usd_total{" + a), 0.001572);
  const std::string text = metrics_.expose();
  EXPECT_NE(text.find("kimi_relay_cost_usd_total{" + a + " 0.001572\n"), std::string::npos);
  // 2 × (500 × 0.60 + 100 × 2.50) µUSD (model-wide row), all estimated.
  EXPECT_EQ(value("kimi_relay_cost_usd_total{key=\"team-b\",model=\"kimi-k2\",node=\"none\","
                  "upstream=\"moonshot\"}"),
            0.0011);
  EXPECT_EQ(value("kimi_relay_tokens_estimated_total{direction=\"input\",model=\"kimi-k2\","
                  "upstream=\"moonshot\"}"),
            1000);
  EXPECT_EQ(value("kimi_relay_tokens_estimated_total{direction=\"output\",model=\"kimi-k2\","
                  "upstream=\"moonshot\"}"),
            200);
  EXPECT_EQ(value("kimi_relay_tokens_estimated_total{direction=\"input\",model=\"kimi-k2\","
                  "upstream=\"holysheep\"}"),
            0);
  // Fallback priced at the served model: 100 × 2.40 + 10 × 10.00 µUSD.
  EXPECT_EQ(value("kimi_relay_cost_usd_total{key=\"team-a\",model=\"kimi-k2-turbo\",node=\"none\","
                  "upstream=\"holysheep\"}"),
            0.00034);
  EXPECT_EQ(value("kimi_relay_unpriced_requests_total{model=\"moonshot-v1-8k\","
                  "upstream=\"moonshot\"}"),
            1);
  EXPECT_EQ(value("kimi_relay_unpriced_requests_total{model=\"kimi-k2\",upstream=\"holysheep\"}"),
            0);
  // No upstream reached: no token or cost series at all.
  EXPECT_EQ(text.find("kimi_relay_tokens_total{direction=\"input\",key=\"none\""),
            std::string::npos);
}

TEST_F(MetricsTest, HistogramCountsAndBuckets) {
  recordKnownTraffic();
  // kimi-k2 served: 3 × 120 ms, 2 × 2.5 s, 0.2 ms (401), 5 ms (429).
  EXPECT_EQ(overNodes("kimi_relay_request_duration_seconds_count{model=\"kimi-k2\",node=\"*\","
                      "region=\"none\"}"),
            7);
  EXPECT_EQ(overNodes("kimi_relay_request_duration_seconds_bucket{model=\"kimi-k2\",node=\"*\","
                      "region=\"none\",le=\"0.001\"}"),
            1);
  EXPECT_EQ(overNodes("kimi_relay_request_duration_seconds_bucket{model=\"kimi-k2\",node=\"*\","
                      "region=\"none\",le=\"0.005\"}"),
            2);
  EXPECT_EQ(overNodes("kimi_relay_request_duration_seconds_bucket{model=\"kimi-k2\",node=\"*\","
                      "region=\"none\",le=\"0.1\"}"),
            2);
  EXPECT_EQ(overNodes("kimi_relay_request_duration_seconds_bucket{model=\"kimi-k2\",node=\"*\","
                      "region=\"none\",le=\"0.125\"}"),
            5);
  EXPECT_EQ(overNodes("kimi_relay_request_duration_seconds_bucket{model=\"kimi-k2\",node=\"*\","
                      "region=\"none\",le=\"2.5\"}"),
            7);
  EXPECT_EQ(overNodes("kimi_relay_request_duration_seconds_bucket{model=\"kimi-k2\",node=\"*\","
                      "region=\"none\",le=\"+Inf\"}"),
            7);
  EXPECT_EQ(
      overNodes(
          "kimi_relay_request_duration_seconds_count{model=\"none\",node=\"*\",region=\"none\"}"),
      1);
  EXPECT_EQ(overNodes("kimi_relay_request_duration_seconds_count{model=\"kimi-k2-turbo\",node=\"*"
                      "\",region=\"none\"}"),
            1);
  // TTFT only for the three streams.
  EXPECT_EQ(value("kimi_relay_time_to_first_token_seconds_count{model=\"kimi-k2\",node=\"none\","
                  "region=\"none\"}"),
            3);
  EXPECT_EQ(value("kimi_relay_time_to_first_token_seconds_bucket{model=\"kimi-k2\",node=\"none\","
                  "region=\"none\",le=\"0.03\"}"),
            3);
  EXPECT_EQ(value("kimi_relay_time_to_first_token_seconds_bucket{model=\"kimi-k2\",node=\"none\","
                  "region=\"none\",le=\"0.025\"}"),
            0);
  EXPECT_EQ(value("kimi_relay_upstream_latency_seconds_count{model=\"kimi-k2\","
                  "upstream=\"holysheep\"}"),
            3);
  EXPECT_EQ(value("kimi_relay_upstream_latency_seconds_count{model=\"kimi-k2\","
                  "upstream=\"moonshot\"}"),
            2);
  EXPECT_EQ(value("kimi_relay_gateway_overhead_seconds_count"), 3);
  EXPECT_EQ(value("kimi_relay_gateway_overhead_seconds_bucket{le=\"4e-05\"}"), 3);
  EXPECT_EQ(value("kimi_relay_gateway_overhead_seconds_bucket{le=\"3e-05\"}"), 0);
}

TEST_F(MetricsTest, WindowQuantilesPerModel) {
  recordKnownTraffic();
  // kimi-k2 served without a node id: 0.2 ms, 3 × 120 ms, 2 × 2.5 s. Nearest
  // rank: p50 is the 3rd (120 ms), p95 and p99 the 6th (2.5 s); bins are
  // within ±1.6 %.
  const std::string m =
      "kimi_relay_request_duration_window_seconds{model=\"kimi-k2\",node=\"none\",quantile=";
  EXPECT_NEAR(value(m + "\"0.5\"}"), 0.12, 0.12 * 0.016);
  EXPECT_NEAR(value(m + "\"0.95\"}"), 2.5, 2.5 * 0.016);
  EXPECT_NEAR(value(m + "\"0.99\"}"), 2.5, 2.5 * 0.016);
  // _count and _sum are totals since start, as for any summary.
  // Per node: the 5 ms request came from node-1, the six others sent no X-Node-Id.
  EXPECT_EQ(
      value("kimi_relay_request_duration_window_seconds_count{model=\"kimi-k2\",node=\"none\"}"),
      6);
  EXPECT_DOUBLE_EQ(
      value("kimi_relay_request_duration_window_seconds_sum{model=\"kimi-k2\",node=\"none\"}"),
      3 * 0.12 + 2 * 2.5 + 0.0002);
  EXPECT_EQ(
      value("kimi_relay_request_duration_window_seconds_count{model=\"kimi-k2\",node=\"node-1\"}"),
      1);
  EXPECT_NEAR(value("kimi_relay_request_duration_window_seconds{model=\"kimi-k2\",node=\"node-1\","
                    "quantile=\"0.5\"}"),
              0.005, 0.005 * 0.016);
  const std::string t =
      "kimi_relay_time_to_first_token_window_seconds{model=\"kimi-k2\",node=\"none\",quantile=";
  for (const char* q : {"\"0.5\"}", "\"0.95\"}", "\"0.99\"}"}) {
    EXPECT_NEAR(value(t + q), 0.03, 0.03 * 0.016);
  }
}

TEST_F(MetricsTest, WindowQuantilesWithManySamples) {
  RequestRecord r = ok("team-a", test::kTeamA, "kimi-k2-turbo", test::kKimiK2Turbo, "holysheep",
                       test::kHolySheep);
  // 1 ms … 1000 ms in a scrambled order.
  for (int i = 0; i < 1000; ++i) {
    r.durationUs = (i * 7919 % 1000 + 1) * 1000;
    telemetry_.record(r);
  }
  const std::string m =
      "kimi_relay_request_duration_window_seconds{model=\"kimi-k2-turbo\",node=\"none\",quantile=";
  EXPECT_NEAR(value(m + "\"0.5\"}"), 0.5, 0.5 * 0.016);
  EXPECT_NEAR(value(m + "\"0.95\"}"), 0.95, 0.95 * 0.016);
  EXPECT_NEAR(value(m + "\"0.99\"}"), 0.99, 0.99 * 0.016);
}

TEST_F(MetricsTest, EventCounters) {
  telemetry_.retry(test::kHolySheep, UpstreamFailure::kServerError);
  telemetry_.retry(test::kHolySheep, UpstreamFailure::kServerError);
  telemetry_.retry(kNone, UpstreamFailure::kTimeout);
  telemetry_.fallback(test::kHolySheep, FallbackKind::kModel, UpstreamFailure::kRateLimited);
  telemetry_.ejection(test::kMoonshotUp, EjectionReason::kConsecutiveFailures);
  for (int i = 0; i < 3; ++i)
    telemetry_.refusal(RefusalReason::kTokens);
  telemetry_.upstreamHealth(test::kMoonshotUp, HealthState::kEjected);
  telemetry_.upstreamHealth(test::kHolySheep, HealthState::kHalfOpen);
  metrics_.configReload(ReloadOutcome::kFailure);
  Metrics::InFlight one(metrics_), two(metrics_);
  { Metrics::InFlight gone(metrics_); }
  telemetry_.mcpStreamOpened(0);

  EXPECT_EQ(value("kimi_relay_retries_total{reason=\"server_error\",upstream=\"holysheep\"}"), 2);
  EXPECT_FALSE(
      sample(metrics_.expose(), "kimi_relay_retries_total{reason=\"timeout\",upstream=\"none\"}"));
  telemetry_.fallback(kNone, FallbackKind::kModel, UpstreamFailure::kOther);
  EXPECT_EQ(value("kimi_relay_fallbacks_total{kind=\"model\",reason=\"other\",upstream=\"none\"}"),
            1);
  EXPECT_EQ(value("kimi_relay_retries_total{reason=\"timeout\",upstream=\"holysheep\"}"), 0);
  EXPECT_EQ(value("kimi_relay_fallbacks_total{kind=\"model\",reason=\"rate_limited\","
                  "upstream=\"holysheep\"}"),
            1);
  EXPECT_EQ(value("kimi_relay_upstream_ejections_total{reason=\"consecutive_failures\","
                  "upstream=\"moonshot\"}"),
            1);
  EXPECT_EQ(value("kimi_relay_rate_limit_refusals_total{reason=\"tokens\"}"), 3);
  EXPECT_EQ(value("kimi_relay_rate_limit_refusals_total{reason=\"budget\"}"), 0);
  EXPECT_EQ(value("kimi_relay_upstream_health_state{upstream=\"moonshot\"}"), 2);
  EXPECT_EQ(value("kimi_relay_upstream_health_state{upstream=\"holysheep\"}"), 1);
  EXPECT_EQ(value("kimi_relay_config_reloads_total{outcome=\"failure\"}"), 1);
  EXPECT_EQ(value("kimi_relay_config_reloads_total{outcome=\"success\"}"), 0);
  EXPECT_GT(value("kimi_relay_config_last_reload_success_timestamp_seconds"), 1.7e9);
  EXPECT_EQ(value("kimi_relay_in_flight_requests"), 2);
  EXPECT_EQ(value("kimi_relay_mcp_open_streams{server=\"everything\"}"), 1);
}

TEST_F(MetricsTest, McpRequestsByServerMethodAndCode) {
  // A histogram family appears with its first series (as the registry's own
  // families do), not as a HELP and TYPE with no samples.
  EXPECT_EQ(metrics_.expose().find("kimi_relay_mcp_request_duration_seconds"), std::string::npos);
  McpRecord call{{}, kNone, "everything", 0, mcpMethodOf("tools/call"), 200, 15'000};
  telemetry_.recordMcp(call);
  telemetry_.recordMcp(call);
  telemetry_.recordMcp(
      McpRecord{{}, kNone, "not-configured", kNone, mcpMethodOf("x/evil"), 404, 100});
  EXPECT_EQ(value("kimi_relay_mcp_requests_total{code=\"200\",key=\"none\",method=\"tools/call\","
                  "server=\"everything\"}"),
            2);
  EXPECT_EQ(value("kimi_relay_mcp_requests_total{code=\"404\",key=\"none\",method=\"other\",server="
                  "\"none\"}"),
            1);
  EXPECT_EQ(value("kimi_relay_mcp_request_duration_seconds_count{method=\"tools/call\"}"), 2);
  EXPECT_EQ(value("kimi_relay_mcp_request_duration_seconds_bucket{method=\"tools/call\","
                  "le=\"0.015\"}"),
            2);
}

// 10,000 small requests: the scraped cost is the exact decimal.
TEST_F(MetricsTest, CostCounterExactToTheCentAfterTenThousandRequests) {
  RequestRecord r =
      ok("team-b", test::kTeamB, "kimi-k2", test::kKimiK2, "moonshot", test::kMoonshotUp);
  r.usage = {7, 3, 11};  // 4 × 0.60 + 3 × 0.15 + 11 × 2.50 = 30.35 µUSD
  Cost total;
  for (int i = 0; i < 10'000; ++i)
    total += telemetry_.record(r).cost;
  EXPECT_EQ(total.picoUsd, 303'500'000'000u);
  const std::string text = metrics_.expose();
  EXPECT_NE(text.find("kimi_relay_cost_usd_total{key=\"team-b\",model=\"kimi-k2\",node=\"none\","
                      "upstream=\"moonshot\"} 0.3035\n"),
            std::string::npos);
}

// Workers race to create and use the same series: counts stay exact.
TEST_F(MetricsTest, ConcurrentRecordingIsExact) {
  constexpr int kThreads = 4, kEach = 5'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        RequestRecord r = ok(i % 2 ? "team-a" : "team-b", i % 2 ? test::kTeamA : test::kTeamB,
                             "kimi-k2", test::kKimiK2, "holysheep", test::kHolySheep);
        r.status = 200 + (i + t) % 3;
        r.usage = {10, 0, 1};
        telemetry_.record(r);
      }
    });
  }
  for (auto& th : threads)
    th.join();
  double requests = 0, input = 0;
  for (const char* key : {"team-a", "team-b"}) {
    for (const char* code : {"200", "201", "202"}) {
      requests +=
          value(std::string("kimi_relay_requests_total{code=\"") + code + "\",key=\"" + key +
                "\",model=\"kimi-k2\",node=\"none\",region=\"none\",upstream=\"holysheep\"}");
    }
    input += value(std::string("kimi_relay_tokens_total{direction=\"input\",key=\"") + key +
                   "\",model=\"kimi-k2\",node=\"none\",upstream=\"holysheep\"}");
  }
  EXPECT_EQ(requests, kThreads * kEach);
  EXPECT_EQ(input, 10.0 * kThreads * kEach);
  EXPECT_EQ(value("kimi_relay_request_duration_seconds_count{model=\"kimi-k2\",node=\"none\","
                  "region=\"none\"}"),
            kThreads * kEach);
}

TEST(Buckets, FineEnoughFromMillisecondsToTenMinutes) {
  const auto b = latencyBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.front(), 0.001);
  EXPECT_EQ(b.back(), 600);
  for (std::size_t i = 1; i < b.size(); ++i) {
    EXPECT_GT(b[i], b[i - 1]);
    EXPECT_LE(b[i] / b[i - 1], 1.34) << b[i];
  }
  const auto o = overheadBuckets();
  EXPECT_EQ(o.front(), 0.00001);
  EXPECT_EQ(o.back(), 0.1);
}

TEST_F(MetricsTest, PromtoolAcceptsTheExposition) {
  if (!std::filesystem::exists("/usr/bin/promtool")) GTEST_SKIP() << "promtool not installed";
  recordKnownTraffic();
  telemetry_.recordMcp(McpRecord{{}, kNone, "everything", 0, McpMethod::kInitialize, 200, 1'000});
  const auto dir = std::filesystem::temp_directory_path();
  const auto in = dir / ("kimi-relay-metrics-" + std::to_string(::getpid()) + ".txt");
  const auto out = dir / ("kimi-relay-promtool-" + std::to_string(::getpid()) + ".txt");
  std::ofstream(in) << metrics_.expose();
  const std::string cmd =
      "/usr/bin/promtool check metrics < " + in.string() + " > " + out.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream report(out);
  const std::string said((std::istreambuf_iterator<char>(report)), {});
  std::filesystem::remove(in);
  std::filesystem::remove(out);
  EXPECT_EQ(rc, 0) << said;
}

}  // namespace
}  // namespace relay::telemetry
