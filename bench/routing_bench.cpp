// Choosing an upstream for one attempt, per strategy: the whole of
// pickUpstream (eligibility, health, shaping, the strategy's choice, the
// lease) over a route of 3 candidates. The difference between the strategies
// is what `routes.MODEL.strategy` adds to a request's CPU.
#include <benchmark/benchmark.h>
#include <chrono>

#include "relay/upstream/balancer.hpp"
#include "relay/upstream/pick.hpp"

namespace {

using namespace relay::upstream;

UpstreamOptions plain() {
  UpstreamOptions o;
  o.health = {.ejectAfterFailures = 5,
              .baseEjection = Millis(10'000),
              .maxEjection = Millis(60'000),
              .probeTimeout = Millis(30'000)};
  return o;
}

void pickWith(benchmark::State& state, relay::config::Strategy strategy) {
  UpstreamStates states({plain(), plain(), plain()});
  std::vector<PeakEwma> latency(3);
  const SteadyTime now = SteadyTime(std::chrono::seconds(100));
  latency[0].observe(12, now);
  latency[1].observe(30, now);
  latency[2].observe(9, now);
  Balancer balancer(strategy, {3, 2, 1}, {0, 1, 2}, 0.05, &latency, &states, 99);
  const std::size_t candidates[] = {0, 1, 2};
  SteadyTime t = now;
  for (auto _ : state) {
    AttemptHistory history(3);
    t += std::chrono::microseconds(50);
    PickResult r = pickUpstream(states, balancer, candidates, history, false, t);
    benchmark::DoNotOptimize(r);
    r.lease->report(HealthVerdict::kSuccess, t);
  }
}

void BM_PickWeighted(benchmark::State& s) {
  pickWith(s, relay::config::Strategy::kWeighted);
}
void BM_PickLeastLatency(benchmark::State& s) {
  pickWith(s, relay::config::Strategy::kLeastLatency);
}
void BM_PickLeastInFlight(benchmark::State& s) {
  pickWith(s, relay::config::Strategy::kLeastInFlight);
}

BENCHMARK(BM_PickWeighted);
BENCHMARK(BM_PickLeastLatency);
BENCHMARK(BM_PickLeastInFlight);

}  // namespace

BENCHMARK_MAIN();
