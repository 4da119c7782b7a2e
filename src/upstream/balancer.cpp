#include "relay/upstream/balancer.hpp"

#include <cmath>
#include <limits>

#include "relay/upstream/upstream_state.hpp"

namespace relay::upstream {

std::string_view strategyName(config::Strategy strategy) {
  switch (strategy) {
    case config::Strategy::kLeastLatency:
      return "least_latency";
    case config::Strategy::kLeastInFlight:
      return "least_in_flight";
    case config::Strategy::kWeighted:
      break;
  }
  return "weighted";
}

namespace {

double decayFactor(SteadyTime from, SteadyTime to) {
  const double dt = std::chrono::duration<double>(to - from).count();
  if (dt <= 0) return 1.0;
  return std::exp(-dt / std::chrono::duration<double>(PeakEwma::kDecay).count());
}

}  // namespace

void PeakEwma::observe(double ms, SteadyTime now) {
  if (!observed_) {
    ewma_ = ms;
  } else {
    const double current = ewma_ * decayFactor(last_, now);
    if (ms > current) {
      ewma_ = ms;  // the peak: a slow answer counts in full, at once
    } else {
      const double w = decayFactor(last_, now);
      ewma_ = current * w + ms * (1 - w);
    }
  }
  last_ = now;
  observed_ = true;
}

double PeakEwma::value(SteadyTime now) const {
  return observed_ ? ewma_ * decayFactor(last_, now) : 0.0;
}

Balancer::Balancer(config::Strategy strategy, std::vector<std::uint32_t> weights,
                   std::vector<std::size_t> upstreams, double exploration,
                   const std::vector<PeakEwma>* latency, const UpstreamStates* states,
                   std::uint64_t seed)
    : strategy_(strategy),
      weights_(weights),
      upstreams_(std::move(upstreams)),
      exploration_(exploration),
      latency_(latency),
      states_(states),
      weighted_(std::move(weights)),
      rng_(seed | 1) {
  if (!latency_ || !states_) strategy_ = config::Strategy::kWeighted;
}

std::uint64_t Balancer::next() {
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  return rng_ * 0x2545F4914F6CDD1DULL;
}

int Balancer::byWeight(std::span<const bool> eligible) {
  const int p = weighted_.pick(eligible);
  if (p >= 0) lastScore_ = weights_[static_cast<std::size_t>(p)];
  return p;
}

double Balancer::inFlight(std::size_t candidate) const {
  return static_cast<double>((*states_)[upstreams_[candidate]].concurrency().inFlight());
}

int Balancer::pick(std::span<const bool> eligible, SteadyTime now) {
  lastExplored_ = false;
  const std::size_t n = weights_.size();
  auto ok = [&](std::size_t i) { return eligible.empty() || eligible[i]; };
  switch (strategy_) {
    case config::Strategy::kWeighted:
      return byWeight(eligible);

    case config::Strategy::kLeastLatency: {
      if (exploration_ > 0 && static_cast<double>(next() >> 11) * 0x1.0p-53 < exploration_) {
        lastExplored_ = true;
        return byWeight(eligible);
      }
      int best = -1;
      double bestCost = std::numeric_limits<double>::infinity();
      for (std::size_t i = 0; i < n; ++i) {
        if (!ok(i)) continue;
        const double cost = (*latency_)[upstreams_[i]].value(now) * (inFlight(i) + 1) / weights_[i];
        if (cost < bestCost) {
          bestCost = cost;
          best = static_cast<int>(i);
        }
      }
      lastScore_ = best >= 0 ? bestCost : 0;
      return best;
    }

    case config::Strategy::kLeastInFlight: {
      // Two distinct eligible candidates, drawn by weight.
      std::uint64_t total = 0;
      std::size_t count = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (!ok(i)) continue;
        total += weights_[i];
        ++count;
      }
      if (count == 0) return -1;
      auto draw = [&](int skip) {
        std::uint64_t sum = total - (skip >= 0 ? weights_[static_cast<std::size_t>(skip)] : 0);
        std::uint64_t r = next() % sum;
        for (std::size_t i = 0; i < n; ++i) {
          if (!ok(i) || static_cast<int>(i) == skip) continue;
          if (r < weights_[i]) return static_cast<int>(i);
          r -= weights_[i];
        }
        return -1;
      };
      const int a = draw(-1);
      if (count == 1) {
        lastScore_ = inFlight(static_cast<std::size_t>(a)) / weights_[static_cast<std::size_t>(a)];
        return a;
      }
      const int b = draw(a);
      const double la =
          inFlight(static_cast<std::size_t>(a)) / weights_[static_cast<std::size_t>(a)];
      const double lb =
          inFlight(static_cast<std::size_t>(b)) / weights_[static_cast<std::size_t>(b)];
      const int chosen = lb < la || (lb == la && (next() & 1)) ? b : a;
      lastScore_ = chosen == a ? la : lb;
      return chosen;
    }
  }
  return byWeight(eligible);
}

}  // namespace relay::upstream
