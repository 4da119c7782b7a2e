#include <gtest/gtest.h>

#include "relay/upstream/upstream_state.hpp"

namespace relay::upstream {
namespace {

UpstreamOptions ejectAfter(std::uint32_t n) {
  UpstreamOptions o;
  o.health.ejectAfterFailures = n;
  return o;
}

void failOnce(UpstreamState& s, SteadyTime now) {
  HealthTicket t = s.health().admit(now);
  ASSERT_TRUE(t);
  s.health().onFailure(t, now);
}

TEST(UpstreamStates, AReloadKeepsTheStateOfAnUnchangedUpstreamByName) {
  const SteadyTime now{std::chrono::seconds(100)};
  UpstreamStates before({ejectAfter(2), ejectAfter(2)});
  failOnce(before[0], now);
  failOnce(before[0], now);
  ASSERT_EQ(before[0].health().status(now), HealthStatus::kEjected);

  // "alpha" moved from index 0 to 1 and kept its options: still ejected.
  UpstreamStates after({ejectAfter(2), ejectAfter(2)}, {"beta", "alpha"}, before,
                       {"alpha", "beta"});
  EXPECT_EQ(&after[1], &before[0]);
  EXPECT_EQ(after[1].health().status(now), HealthStatus::kEjected);
  EXPECT_EQ(&after[0], &before[1]);
}

TEST(UpstreamStates, ChangedOptionsOrANewNameStartFresh) {
  const SteadyTime now{std::chrono::seconds(100)};
  UpstreamStates before({ejectAfter(2)});
  failOnce(before[0], now);
  failOnce(before[0], now);

  UpstreamStates changed({ejectAfter(3)}, {"alpha"}, before, {"alpha"});
  EXPECT_NE(&changed[0], &before[0]);
  EXPECT_EQ(changed[0].health().status(now), HealthStatus::kHealthy);

  UpstreamStates renamed({ejectAfter(2)}, {"gamma"}, before, {"alpha"});
  EXPECT_EQ(renamed[0].health().status(now), HealthStatus::kHealthy);
}

}  // namespace
}  // namespace relay::upstream
