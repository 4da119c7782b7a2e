// Choosing the upstream for one attempt: the route's weighted selector, passive
// health, shaping and the retry budget together. Pure logic over shared state;
// the selector is the calling worker's own.
//
// Order of preference:
//   1. healthy candidates this request has not tried yet, by weight;
//   2. healthy candidates it already tried (a retry "prefers" others, it does
//      not require them);
//   3. when no candidate is healthy — every one ejected or probing — the
//      least-recently-ejected one anyway (a last resort; never eject a whole
//      pool, since refusing every request is worse than trying a doubtful one).
// Candidates the request excluded (they asked for a wait longer than its
// deadline) are never chosen. A candidate refused by shaping or budget is
// skipped and the next one tried; the pool-wide answer says why none took it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "relay/upstream/balancer.hpp"
#include "relay/upstream/selector.hpp"
#include "relay/upstream/time.hpp"
#include "relay/upstream/upstream_state.hpp"

namespace relay::upstream {

// One request's memory across its attempts, by upstream index (so a fallback
// model also avoids an upstream that just failed for the primary one).
class AttemptHistory {
 public:
  explicit AttemptHistory(std::size_t upstreams) : marks_(upstreams, 0) {}

  // Counts an attempt sent to `upstream` (call when it is sent, whatever the outcome).
  void recordAttempt(std::size_t upstream);
  // Never choose `upstream` again for this request.
  void exclude(std::size_t upstream);
  // Not for the model being tried now (data residency: its region is not
  // allowed); cleared for the next model, which may allow it.
  void bar(std::size_t upstream) { marks_.at(upstream) |= kBarred; }
  void clearBars() {
    for (auto& m : marks_)
      m &= static_cast<std::uint8_t>(~kBarred);
  }

  unsigned attempts() const { return attempts_; }
  bool tried(std::size_t upstream) const { return (marks_.at(upstream) & kTried) != 0; }
  bool excluded(std::size_t upstream) const {
    return (marks_.at(upstream) & (kExcluded | kBarred)) != 0;
  }

 private:
  static constexpr std::uint8_t kTried = 1;
  static constexpr std::uint8_t kExcluded = 2;
  static constexpr std::uint8_t kBarred = 4;
  // Inline for pools up to 32 upstreams: a request's history costs no
  // allocation in any usual configuration.
  boost::container::small_vector<std::uint8_t, 32> marks_;
  unsigned attempts_ = 0;
};

enum class PickRefusal {
  kNone,
  kNoCandidate,  // nothing left to try (all excluded, or no candidates)
  kFull,         // candidates exist but are at their concurrency or rate cap
  kBudget,       // candidates exist but their retry budgets are spent
};

struct PickResult {
  std::optional<Lease> lease;
  PickRefusal refusal = PickRefusal::kNone;
  // kFull: the earliest instant a rate-capped candidate admits again; nullopt
  // when only concurrency caps refused (a slot frees when a request ends).
  std::optional<SteadyTime> retryAt;
};

// `candidates[i]` is the upstream index of the route's i-th candidate, in the
// order `selector` was built with. `retry` is true for every attempt after the
// request's first (any model): it spends the chosen upstream's retry budget.
PickResult pickUpstream(UpstreamStates& states, SmoothWeightedSelector& selector,
                        std::span<const std::size_t> candidates, const AttemptHistory& history,
                        bool retry, SteadyTime now);
// The same with a route's strategy (balancer.hpp) choosing among the eligible.
PickResult pickUpstream(UpstreamStates& states, Balancer& balancer,
                        std::span<const std::size_t> candidates, const AttemptHistory& history,
                        bool retry, SteadyTime now);

// Rule 3 alone: among the candidates not excluded, the one ejected longest
// ago (ties: the first). nullopt when all are excluded.
std::optional<std::size_t> leastRecentlyEjected(const UpstreamStates& states,
                                                std::span<const std::size_t> candidates,
                                                const AttemptHistory& history);

}  // namespace relay::upstream
