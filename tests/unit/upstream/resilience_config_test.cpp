#include "relay/upstream/resilience_config.hpp"

#include <gtest/gtest.h>

namespace relay::upstream {
namespace {

TEST(ResilienceConfig, MapsEveryKey) {
  config::Config c;
  c.retry.maxAttempts = 4;
  c.retry.backoff = {250, 4'000};
  c.retry.retryOn = {"timeout", "503"};
  c.retry.budget = {0.1, 2};
  c.timeouts.totalMs = 90'000;
  config::Upstream u;
  u.name = "a";
  u.maxConcurrency = 16;
  u.rpm = 600;
  u.health = {7, 1'000, 9'000, 0};
  c.upstreams = {u, config::Upstream{}};

  const RetryOptions r = retryOptions(c.retry);
  EXPECT_EQ(r.maxAttempts, 4u);
  EXPECT_EQ(r.backoff.base, Millis(250));
  EXPECT_EQ(r.backoff.max, Millis(4'000));
  EXPECT_TRUE(r.retryOn.timeout());
  EXPECT_TRUE(r.retryOn.status(503));
  EXPECT_FALSE(r.retryOn.connectError());
  EXPECT_FALSE(r.retryOn.status(429));

  const std::vector<UpstreamOptions> all = upstreamOptions(c);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].health.ejectAfterFailures, 7u);
  EXPECT_EQ(all[0].health.baseEjection, Millis(1'000));
  EXPECT_EQ(all[0].health.maxEjection, Millis(9'000));
  EXPECT_EQ(all[0].health.probeTimeout, Millis(90'000));
  EXPECT_DOUBLE_EQ(all[0].retryBudget.ratio, 0.1);
  EXPECT_DOUBLE_EQ(all[0].retryBudget.minPerSecond, 2);
  EXPECT_EQ(all[0].shaping.maxConcurrency, 16u);
  EXPECT_EQ(all[0].shaping.rpm, 600u);
  EXPECT_EQ(all[1].shaping.rpm, 0u);
  EXPECT_EQ(all[1].health.ejectAfterFailures, 5u);
}

TEST(ResilienceConfig, DefaultRetryOnMatchesTheIssue) {
  const RetryOptions r = retryOptions(config::Retry{});
  EXPECT_TRUE(r.retryOn.connectError());
  EXPECT_TRUE(r.retryOn.timeout());
  for (int code : {429, 500, 502, 503, 504})
    EXPECT_TRUE(r.retryOn.status(code)) << code;
  EXPECT_FALSE(r.retryOn.status(501));
}

}  // namespace
}  // namespace relay::upstream
