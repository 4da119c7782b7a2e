#include "relay/upstream/pick.hpp"

#include <memory>

namespace relay::upstream {

void AttemptHistory::recordAttempt(std::size_t upstream) {
  marks_.at(upstream) |= kTried;
  ++attempts_;
}

void AttemptHistory::exclude(std::size_t upstream) {
  marks_.at(upstream) |= kExcluded;
}

std::optional<std::size_t> leastRecentlyEjected(const UpstreamStates& states,
                                                std::span<const std::size_t> candidates,
                                                const AttemptHistory& history) {
  std::optional<std::size_t> best;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (history.excluded(candidates[i])) continue;
    if (!best || states[candidates[i]].health().lastEjectedAt() <
                     states[candidates[*best]].health().lastEjectedAt()) {
      best = i;
    }
  }
  return best;
}

namespace {

struct Tally {
  bool full = false;
  bool budget = false;
  std::optional<SteadyTime> retryAt;

  void note(const Admission& a) {
    switch (a.refusal) {
      case Refusal::kConcurrency:
        full = true;
        break;
      case Refusal::kRate:
        full = true;
        if (a.retryAt && (!retryAt || *a.retryAt < *retryAt)) retryAt = a.retryAt;
        break;
      case Refusal::kBudget:
        budget = true;
        break;
      case Refusal::kHealth:
      case Refusal::kNone:
        break;
    }
  }
};

template <class Choose>
PickResult pickWith(UpstreamStates& states, Choose&& choose,
                    std::span<const std::size_t> candidates, const AttemptHistory& history,
                    bool retry, SteadyTime now) {
  PickResult result;
  Tally tally;
  const std::size_t n = candidates.size();
  auto tryCandidate = [&](std::size_t i, bool forced) {
    const std::size_t upstream = candidates[i];
    Admission a = states[upstream].admit(now, retry, forced);
    if (!a) {
      tally.note(a);
      return false;
    }
    result.lease =
        Lease{&states[upstream], upstream, i, retry, std::move(a.health), std::move(a.slot)};
    return true;
  };

  // bool[] rather than vector<bool>: the selector takes a span of real bools.
  // On the stack for any pool up to kOnStack upstreams (no allocation per
  // pick), from the heap beyond.
  constexpr std::size_t kOnStack = 64;
  bool onStack[kOnStack];
  std::unique_ptr<bool[]> onHeap;
  bool* const eligible = n <= kOnStack ? onStack : (onHeap = std::make_unique<bool[]>(n)).get();
  for (const bool secondPass : {false, true}) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t u = candidates[i];
      eligible[i] = !history.excluded(u) && history.tried(u) == secondPass &&
                    states[u].health().eligible(now);
    }
    for (int p; (p = choose(std::span<const bool>(eligible, n))) >= 0;) {
      if (tryCandidate(static_cast<std::size_t>(p), false)) return result;
      eligible[static_cast<std::size_t>(p)] = false;
    }
  }
  // Every refusal so far was for health: the pool is entirely ejected (or its
  // probes are taken). Shaping and budget refusals are real limits and are not
  // overridden this way.
  if (!tally.full && !tally.budget) {
    if (auto last = leastRecentlyEjected(states, candidates, history)) {
      if (tryCandidate(*last, true)) return result;
    }
  }
  result.refusal = tally.full     ? PickRefusal::kFull
                   : tally.budget ? PickRefusal::kBudget
                                  : PickRefusal::kNoCandidate;
  result.retryAt = tally.retryAt;
  return result;
}

}  // namespace

PickResult pickUpstream(UpstreamStates& states, SmoothWeightedSelector& selector,
                        std::span<const std::size_t> candidates, const AttemptHistory& history,
                        bool retry, SteadyTime now) {
  return pickWith(
      states, [&](std::span<const bool> eligible) { return selector.pick(eligible); }, candidates,
      history, retry, now);
}

PickResult pickUpstream(UpstreamStates& states, Balancer& balancer,
                        std::span<const std::size_t> candidates, const AttemptHistory& history,
                        bool retry, SteadyTime now) {
  return pickWith(
      states, [&](std::span<const bool> eligible) { return balancer.pick(eligible, now); },
      candidates, history, retry, now);
}

}  // namespace relay::upstream
