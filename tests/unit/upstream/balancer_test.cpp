// Routing strategies (balancer.hpp): peak-EWMA arithmetic, least_latency's
// choice and exploration, least_in_flight's power of two choices, and the
// residency bar of AttemptHistory.
#include "relay/upstream/balancer.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "relay/upstream/pick.hpp"

namespace relay::upstream {
namespace {

SteadyTime at(std::int64_t ms) {
  return SteadyTime(Millis(ms));
}

UpstreamOptions plain() {
  UpstreamOptions o;
  o.health = {.ejectAfterFailures = 3,
              .baseEjection = Millis(10'000),
              .maxEjection = Millis(60'000),
              .probeTimeout = Millis(30'000)};
  return o;
}

TEST(PeakEwma, APeakCountsAtOnceAndFallsBackSlowly) {
  PeakEwma e;
  EXPECT_FALSE(e.observed());
  EXPECT_EQ(e.value(at(0)), 0.0);
  e.observe(10, at(0));
  EXPECT_DOUBLE_EQ(e.value(at(0)), 10.0);
  e.observe(200, at(100));  // above: taken whole
  EXPECT_DOUBLE_EQ(e.value(at(100)), 200.0);
  e.observe(10, at(1100));  // below: weighted by exp(-1 s / 10 s)
  const double w = std::exp(-0.1);
  const double expected = 200.0 * w * w + 10.0 * (1 - w);
  EXPECT_NEAR(e.value(at(1100)), expected, 1e-9);
  // With nothing observed the cost decays toward 0 (an idle upstream is tried again).
  EXPECT_NEAR(e.value(at(11'100)), expected * std::exp(-1.0), 1e-9);
}

struct Fixture {
  Fixture() : states({plain(), plain()}), latency(2) {}
  Balancer make(config::Strategy s, double exploration = 0) {
    return Balancer(s, {1, 1}, {0, 1}, exploration, &latency, &states, 42);
  }
  UpstreamStates states;
  std::vector<PeakEwma> latency;
};

TEST(Balancer, LeastLatencyTriesTheUnmeasuredThenPrefersTheFaster) {
  Fixture f;
  Balancer b = f.make(config::Strategy::kLeastLatency);
  f.latency[0].observe(50, at(0));
  EXPECT_EQ(b.pick({}, at(0)), 1) << "never observed: cost 0, tried first";
  f.latency[1].observe(200, at(0));
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(b.pick({}, at(10)), 0);
  EXPECT_NEAR(b.lastScore(), 50.0 * std::exp(-0.001), 1e-6);
  // In flight multiplies the cost: 50 × 5 > 200 × 1.
  std::vector<ConcurrencyPermit> busy;
  for (int i = 0; i < 4; ++i)
    busy.push_back(f.states[0].concurrency().tryAcquire());
  EXPECT_EQ(b.pick({}, at(10)), 1);
  // Only eligible candidates are considered.
  busy.clear();
  const bool onlySecond[] = {false, true};
  EXPECT_EQ(b.pick(onlySecond, at(10)), 1);
}

TEST(Balancer, ExplorationPicksByWeightAboutAsOftenAsConfigured) {
  Fixture f;
  Balancer b = f.make(config::Strategy::kLeastLatency, 0.1);
  f.latency[0].observe(10, at(0));
  f.latency[1].observe(500, at(0));
  int slow = 0, explored = 0;
  for (int i = 0; i < 10'000; ++i) {
    slow += b.pick({}, at(1)) == 1;
    explored += b.lastExplored();
  }
  EXPECT_NEAR(explored, 1000, 150);
  EXPECT_NEAR(slow, 500, 120) << "half of the explored picks go to the slow one (equal weights)";
}

TEST(Balancer, LeastInFlightPicksTheLessBusyOfTwo) {
  Fixture f;
  Balancer b = f.make(config::Strategy::kLeastInFlight);
  std::vector<ConcurrencyPermit> busy;
  busy.push_back(f.states[1].concurrency().tryAcquire());
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(b.pick({}, at(0)), 0);
  busy.push_back(f.states[0].concurrency().tryAcquire());
  int first = 0;
  for (int i = 0; i < 1000; ++i)
    first += b.pick({}, at(0)) == 0;
  EXPECT_NEAR(first, 500, 80) << "a tie is broken at random";
}

TEST(Balancer, WithoutSharedStateItIsWeighted) {
  Balancer b(config::Strategy::kLeastLatency, {2, 1}, {0, 1}, 0, nullptr, nullptr, 7);
  EXPECT_EQ(b.strategy(), config::Strategy::kWeighted);
  int first = 0;
  for (int i = 0; i < 30; ++i)
    first += b.pick({}, at(0)) == 0;
  EXPECT_EQ(first, 20);
}

TEST(AttemptHistory, ABarKeepsAnUpstreamOutOfOneModelOnly) {
  UpstreamStates states({plain(), plain()});
  AttemptHistory h(2);
  Balancer b(config::Strategy::kWeighted, {100, 1}, {0, 1}, 0, nullptr, nullptr, 1);
  h.bar(0);
  const std::size_t candidates[] = {0, 1};
  for (int i = 0; i < 5; ++i) {
    PickResult r = pickUpstream(states, b, candidates, h, false, at(0));
    ASSERT_TRUE(r.lease);
    EXPECT_EQ(r.lease->upstream, 1u);
  }
  // Even when the allowed one is ejected, the barred one is no last resort.
  for (int i = 0; i < 3; ++i) {
    HealthTicket t = states[1].health().admit(at(0));
    states[1].health().onFailure(t, at(0));
  }
  PickResult none = pickUpstream(states, b, candidates, h, false, at(1));
  ASSERT_TRUE(none.lease) << "the allowed one, ejected, is still the last resort";
  EXPECT_EQ(none.lease->upstream, 1u);
  h.clearBars();
  EXPECT_FALSE(h.excluded(0));
}

}  // namespace
}  // namespace relay::upstream
