#include "relay/upstream/pick.hpp"

#include <map>
#include <vector>

#include <gtest/gtest.h>

namespace relay::upstream {
namespace {

SteadyTime at(std::int64_t ms) {
  return SteadyTime(Millis(ms));
}

UpstreamOptions plain() {
  UpstreamOptions o;
  o.health = {.ejectAfterFailures = 1,
              .baseEjection = Millis(10'000),
              .maxEjection = Millis(60'000),
              .probeTimeout = Millis(30'000)};
  o.retryBudget = {.ratio = 0.2, .minPerSecond = 5};
  return o;
}

// Three upstreams weighted 3:2:1, all candidates of one route.
struct Pool {
  explicit Pool(const std::vector<UpstreamOptions>& options = {plain(), plain(), plain()})
      : states(options), selector({3, 2, 1}), history(3) {}
  PickResult pick(SteadyTime now, bool retry = false) {
    return pickUpstream(states, selector, candidates, history, retry, now);
  }
  void eject(std::size_t upstream, SteadyTime now) {
    HealthTicket t = states[upstream].health().admit(now);
    states[upstream].health().onFailure(t, now);
  }
  UpstreamStates states;
  SmoothWeightedSelector selector;
  AttemptHistory history;
  std::vector<std::size_t> candidates = {0, 1, 2};
};

TEST(Pick, FollowsTheWeights) {
  Pool pool;
  std::map<std::size_t, int> counts;
  for (int i = 0; i < 60; ++i) {
    PickResult r = pool.pick(at(0));
    ASSERT_TRUE(r.lease);
    ++counts[r.lease->upstream];
    r.lease->report(HealthVerdict::kSuccess, at(0));
  }
  EXPECT_EQ(counts, (std::map<std::size_t, int>{{0, 30}, {1, 20}, {2, 10}}));
}

// The eligibility flags live on the stack up to 64 candidates and on the
// heap beyond: on both sides of that line every candidate is reachable and
// an excluded one never picked.
TEST(Pick, PoolsOfEverySizeAroundTheOnStackBound) {
  for (const std::size_t n :
       {std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{65}, std::size_t{200}}) {
    UpstreamStates states(std::vector<UpstreamOptions>(n, plain()));
    SmoothWeightedSelector selector(std::vector<std::uint32_t>(n, 1));
    AttemptHistory history(n);
    std::vector<std::size_t> candidates(n);
    for (std::size_t i = 0; i < n; ++i)
      candidates[i] = i;
    if (n > 1) history.exclude(n - 1);
    std::map<std::size_t, int> counts;
    for (std::size_t i = 0; i < 2 * n; ++i) {
      PickResult r = pickUpstream(states, selector, candidates, history, false, at(0));
      ASSERT_TRUE(r.lease) << n;
      ++counts[r.lease->upstream];
      r.lease->report(HealthVerdict::kSuccess, at(0));
    }
    EXPECT_EQ(counts.size(), n > 1 ? n - 1 : 1) << "every candidate but the excluded one, of " << n;
    if (n > 1) EXPECT_EQ(counts.count(n - 1), 0u) << n;
  }
}

TEST(Pick, PrefersUpstreamsTheRequestHasNotTried) {
  Pool pool;
  pool.history.recordAttempt(0);
  for (int i = 0; i < 10; ++i) {
    PickResult r = pool.pick(at(0), true);
    ASSERT_TRUE(r.lease);
    EXPECT_NE(r.lease->upstream, 0u);
    EXPECT_TRUE(r.lease->retry);
  }
}

TEST(Pick, FallsBackToATriedUpstreamWhenNothingElseIsHealthy) {
  Pool pool;
  pool.history.recordAttempt(0);
  pool.eject(1, at(0));
  pool.eject(2, at(0));
  PickResult r = pool.pick(at(1), true);
  ASSERT_TRUE(r.lease);
  EXPECT_EQ(r.lease->upstream, 0u);
  EXPECT_EQ(r.lease->pass(), HealthPass::kNormal);
}

TEST(Pick, NeverChoosesAnExcludedUpstream) {
  Pool pool;
  pool.history.exclude(0);
  pool.history.exclude(2);
  for (int i = 0; i < 6; ++i) {
    PickResult r = pool.pick(at(0));
    ASSERT_TRUE(r.lease);
    EXPECT_EQ(r.lease->upstream, 1u);
  }
  pool.history.exclude(1);
  PickResult none = pool.pick(at(0));
  EXPECT_FALSE(none.lease);
  EXPECT_EQ(none.refusal, PickRefusal::kNoCandidate);
}

TEST(Pick, WhenAllAreEjectedTheLeastRecentlyEjectedStillGetsTraffic) {
  Pool pool;
  pool.eject(1, at(100));
  pool.eject(2, at(200));
  pool.eject(0, at(300));
  for (int i = 0; i < 3; ++i) {
    PickResult r = pool.pick(at(400));
    ASSERT_TRUE(r.lease);
    EXPECT_EQ(r.lease->upstream, 1u);
    EXPECT_EQ(r.lease->pass(), HealthPass::kForced);
  }
  EXPECT_EQ(leastRecentlyEjected(pool.states, pool.candidates, pool.history), 1u);
  pool.history.exclude(1);
  EXPECT_EQ(leastRecentlyEjected(pool.states, pool.candidates, pool.history), 2u);
  // Its success closes its circuit; the others stay ejected.
  pool.history = AttemptHistory(3);
  PickResult r = pool.pick(at(500));
  r.lease->report(HealthVerdict::kSuccess, at(500));
  EXPECT_EQ(pool.states[1].health().status(at(500)), HealthStatus::kHealthy);
  EXPECT_EQ(pool.states[0].health().status(at(500)), HealthStatus::kEjected);
}

TEST(Pick, AnExpiredEjectionIsProbedByOneRequestOnly) {
  Pool pool({plain(), plain()});
  pool.selector = SmoothWeightedSelector({1, 1});
  pool.candidates = {0, 1};
  pool.history = AttemptHistory(2);
  pool.eject(0, at(0));
  PickResult probe;
  for (int i = 0; i < 4 && !probe.lease; ++i) {
    PickResult r = pool.pick(at(10'000));
    ASSERT_TRUE(r.lease);
    if (r.lease->upstream == 0) probe = std::move(r);
  }
  ASSERT_TRUE(probe.lease);
  EXPECT_EQ(probe.lease->pass(), HealthPass::kProbe);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(pool.pick(at(10'001)).lease->upstream, 1u);
  probe.lease->report(HealthVerdict::kSuccess, at(10'002));
  std::map<std::size_t, int> counts;
  for (int i = 0; i < 10; ++i)
    ++counts[pool.pick(at(10'003)).lease->upstream];
  EXPECT_EQ(counts, (std::map<std::size_t, int>{{0, 5}, {1, 5}}));
}

TEST(Pick, ConcurrencyCapMovesRequestsElsewhereThenReportsFull) {
  UpstreamOptions capped = plain();
  capped.shaping.maxConcurrency = 1;
  Pool pool({capped, capped, capped});
  std::vector<Lease> held;
  for (int i = 0; i < 3; ++i) {
    PickResult r = pool.pick(at(0));
    ASSERT_TRUE(r.lease) << i;
    held.push_back(std::move(*r.lease));
  }
  std::vector<std::uint64_t> before;
  for (std::size_t u = 0; u < 3; ++u)
    before.push_back(pool.states[u].concurrencyRefusals());
  PickResult full = pool.pick(at(0));
  EXPECT_FALSE(full.lease);
  EXPECT_EQ(full.refusal, PickRefusal::kFull);
  EXPECT_EQ(full.retryAt, std::nullopt);  // a slot frees when a request ends
  for (std::size_t u = 0; u < 3; ++u) {
    EXPECT_EQ(pool.states[u].concurrencyRefusals(), before[u] + 1) << "each tried once";
  }
  held[1].release();
  PickResult again = pool.pick(at(0));
  ASSERT_TRUE(again.lease);
  EXPECT_EQ(again.lease->upstream, held[1].upstream);
}

TEST(Pick, RateCapsReportTheEarliestFreeInstant) {
  UpstreamOptions slow = plain();
  slow.shaping.rpm = 60;
  UpstreamOptions slower = plain();
  slower.shaping.rpm = 30;
  Pool pool({slower, slow, slower});
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(pool.pick(at(0)).lease);
  PickResult full = pool.pick(at(0));
  EXPECT_EQ(full.refusal, PickRefusal::kFull);
  EXPECT_EQ(full.retryAt, at(1'000));
  PickResult later = pool.pick(at(1'000));
  ASSERT_TRUE(later.lease);
  EXPECT_EQ(later.lease->upstream, 1u);
}

TEST(Pick, RetriesStopWhenTheRetryBudgetIsSpent) {
  UpstreamOptions stingy = plain();
  stingy.retryBudget = {.ratio = 0.5, .minPerSecond = 0};
  Pool pool({stingy});
  pool.selector = SmoothWeightedSelector({1});
  pool.candidates = {0};
  pool.history = AttemptHistory(1);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(pool.pick(at(0)).lease);  // 4 firsts: 2 tokens
  EXPECT_TRUE(pool.pick(at(0), true).lease);
  EXPECT_TRUE(pool.pick(at(0), true).lease);
  PickResult refused = pool.pick(at(0), true);
  EXPECT_FALSE(refused.lease);
  EXPECT_EQ(refused.refusal, PickRefusal::kBudget);
  EXPECT_EQ(pool.states[0].retryBudget().retriesRefused(), 1u);
}

TEST(Pick, ARateRefusalRefundsTheRetryTokenAndReturnsTheProbe) {
  UpstreamOptions o = plain();
  o.shaping.rpm = 60;
  o.retryBudget = {.ratio = 1, .minPerSecond = 0, .memory = Millis(0)};  // no fade: exact balance
  Pool pool({o});
  pool.selector = SmoothWeightedSelector({1});
  pool.candidates = {0};
  pool.history = AttemptHistory(1);
  PickResult first = pool.pick(at(0));  // deposits one retry token, spends the rpm
  ASSERT_TRUE(first.lease);
  first.lease->report(HealthVerdict::kFailure, at(0));  // ejected for 10 s
  EXPECT_EQ(pool.pick(at(500), true).refusal, PickRefusal::kFull);
  EXPECT_DOUBLE_EQ(pool.states[0].retryBudget().balance(at(500)), 1.0);
  PickResult probe = pool.pick(at(10'000), true);
  ASSERT_TRUE(probe.lease);
  EXPECT_EQ(probe.lease->pass(), HealthPass::kProbe);
}

TEST(Pick, ARefusedProbeIsHandedBack) {
  UpstreamOptions capped = plain();
  capped.shaping.maxConcurrency = 1;
  Pool pool({capped});
  pool.selector = SmoothWeightedSelector({1});
  pool.candidates = {0};
  pool.history = AttemptHistory(1);
  PickResult holder = pool.pick(at(0));
  ASSERT_TRUE(holder.lease);
  pool.eject(0, at(0));
  EXPECT_EQ(pool.pick(at(10'000)).refusal, PickRefusal::kFull);  // probe claimed, slot full
  holder.lease->release();
  PickResult probe = pool.pick(at(10'001));
  ASSERT_TRUE(probe.lease);
  EXPECT_EQ(probe.lease->pass(), HealthPass::kProbe);
}

}  // namespace
}  // namespace relay::upstream
