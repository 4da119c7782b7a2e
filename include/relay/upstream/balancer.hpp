// How one worker chooses among a route's candidates (routes.MODEL.strategy,
// docs/configuration.md "routing"). Pure logic over the worker's own state
// and the shared in-flight counts; no locks.
//
//  weighted         smooth weighted round-robin (selector.hpp): each
//                   candidate gets exactly its weight's share.
//  least_latency    peak-EWMA of time to first byte, as Finagle and Linkerd
//                   balance: a candidate's cost is
//                     cost = ewma_ms(now) * (in_flight + 1) / weight
//                   where ewma jumps to any observation above it (a latency
//                   spike counts at once), otherwise moves toward it with
//                   weight exp(-dt / 10 s), and decays toward 0 while nothing
//                   is observed (so a candidate that was slow is tried again
//                   as its record ages). The cheapest eligible candidate wins;
//                   one never observed costs 0 (it gets tried). A share
//                   `exploration` (routing.exploration, default 5 %) of picks
//                   is made by weight alone, so every candidate keeps being
//                   measured.
//  least_in_flight  power of two choices: two distinct eligible candidates
//                   drawn at random (by weight), the one with fewer requests
//                   in flight per unit of weight wins.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "relay/config/config.hpp"
#include "relay/upstream/selector.hpp"
#include "relay/upstream/time.hpp"

namespace relay::upstream {

class UpstreamStates;

// Peak-EWMA of one upstream's time to first byte, on one worker.
class PeakEwma {
 public:
  static constexpr std::chrono::seconds kDecay{10};

  void observe(double ms, SteadyTime now);
  // The cost now: 0 when never observed; decays toward 0 with time since
  // the last observation.
  double value(SteadyTime now) const;
  bool observed() const { return observed_; }

 private:
  double ewma_ = 0;
  SteadyTime last_{};
  bool observed_ = false;
};

class Balancer {
 public:
  // `weights[i]` and `upstreams[i]` describe candidate i. `latency` (indexed
  // by upstream) and `states` must outlive the balancer; either may be null
  // for the weighted strategy.
  Balancer(config::Strategy strategy, std::vector<std::uint32_t> weights,
           std::vector<std::size_t> upstreams, double exploration,
           const std::vector<PeakEwma>* latency, const UpstreamStates* states, std::uint64_t seed);

  // The candidate to try among those `eligible` (all when empty); -1 when
  // none is. `now` dates the latency costs.
  int pick(std::span<const bool> eligible, SteadyTime now);

  config::Strategy strategy() const { return strategy_; }
  // The last pick's score (least_latency: its cost in ms; least_in_flight:
  // in-flight per weight; weighted: its weight) and whether it explored.
  double lastScore() const { return lastScore_; }
  bool lastExplored() const { return lastExplored_; }

 private:
  std::uint64_t next();  // xorshift64*
  int byWeight(std::span<const bool> eligible);
  double inFlight(std::size_t candidate) const;

  config::Strategy strategy_;
  std::vector<std::uint32_t> weights_;
  std::vector<std::size_t> upstreams_;
  double exploration_;
  const std::vector<PeakEwma>* latency_;
  const UpstreamStates* states_;
  SmoothWeightedSelector weighted_;
  std::uint64_t rng_;
  double lastScore_ = 0;
  bool lastExplored_ = false;
};

std::string_view strategyName(config::Strategy strategy);

}  // namespace relay::upstream
