// Everything the resilience logic keeps about one upstream — passive health,
// retry budget, concurrency and rate shaping — shared by every worker and
// lock-free. `UpstreamStates` holds one per configured upstream, indexed like
// Catalog::upstreams().
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "relay/upstream/health.hpp"
#include "relay/upstream/retry_budget.hpp"
#include "relay/upstream/retry_planner.hpp"
#include "relay/upstream/shaping.hpp"
#include "relay/upstream/time.hpp"

namespace relay::upstream {

struct UpstreamOptions {
  HealthOptions health;
  RetryBudgetOptions retryBudget;
  ShapingOptions shaping;
};

// Why an upstream did not take an attempt.
enum class Refusal { kNone, kHealth, kConcurrency, kRate, kBudget };

class UpstreamState;

// What one attempt holds while it runs: its health ticket and its in-flight
// slot. Move-only; dropping it unreported gives a probe back and frees the slot.
struct Lease {
  UpstreamState* state = nullptr;
  std::size_t upstream = 0;   // index into Catalog::upstreams()
  std::size_t candidate = 0;  // position in the route's candidates
  bool retry = false;         // spent a retry-budget token
  HealthTicket health;
  ConcurrencyPermit slot;

  HealthPass pass() const { return health.pass(); }
  // Reports the outcome to passive health (once; later calls are ignored).
  // The in-flight slot stays held until release(): a streamed body is still
  // load on the upstream after its head said 200.
  void report(HealthVerdict verdict, SteadyTime now);
  void report(const AttemptFailure& failure, SteadyTime now) {
    report(healthVerdict(failure), now);
  }
  // Frees the in-flight slot (when the response body is finished or abandoned).
  void release() { slot.release(); }
};

// The result of asking one upstream to take an attempt.
struct Admission {
  Refusal refusal = Refusal::kNone;
  std::optional<SteadyTime> retryAt;  // kRate: when a request would be admitted
  HealthTicket health;
  ConcurrencyPermit slot;
  explicit operator bool() const { return refusal == Refusal::kNone; }
};

class UpstreamState {
 public:
  explicit UpstreamState(const UpstreamOptions& options);
  UpstreamState(const UpstreamState&) = delete;
  UpstreamState& operator=(const UpstreamState&) = delete;

  // All checks for one attempt, in an order that wastes nothing on refusal:
  // health (a probe is handed back if a later check refuses), in-flight slot
  // (freed likewise), retry budget for a retry (refunded if the rate then
  // refuses), rate last (the only one that is not cheaply undone). A granted
  // first attempt deposits into the retry budget.
  Admission admit(SteadyTime now, bool retry, bool forced = false);

  HealthTracker& health() { return health_; }
  const HealthTracker& health() const { return health_; }
  RetryBudget& retryBudget() { return retryBudget_; }
  const RetryBudget& retryBudget() const { return retryBudget_; }
  ConcurrencyLimit& concurrency() { return concurrency_; }
  const ConcurrencyLimit& concurrency() const { return concurrency_; }
  RateLimit& rate() { return rate_; }

  // Metrics: attempts refused by shaping.
  std::uint64_t concurrencyRefusals() const {
    return concurrencyRefusals_.load(std::memory_order_relaxed);
  }

 private:
  HealthTracker health_;
  RetryBudget retryBudget_;
  ConcurrencyLimit concurrency_;
  RateLimit rate_;
  std::atomic<std::uint64_t> concurrencyRefusals_{0};
};

class UpstreamStates {
 public:
  explicit UpstreamStates(const std::vector<UpstreamOptions>& options);
  // For a config reload: upstream i takes over `previous`'s state of the same
  // name when its options did not change (health, retry budget and shaping
  // carry on); others start fresh. `names` and `previousNames` index like the
  // options of each.
  UpstreamStates(const std::vector<UpstreamOptions>& options, const std::vector<std::string>& names,
                 const UpstreamStates& previous, const std::vector<std::string>& previousNames);
  UpstreamStates(const UpstreamStates&) = delete;
  UpstreamStates& operator=(const UpstreamStates&) = delete;

  UpstreamState& operator[](std::size_t upstream) { return *states_[upstream]; }
  const UpstreamState& operator[](std::size_t upstream) const { return *states_[upstream]; }
  std::size_t size() const { return states_.size(); }

 private:
  // Shared: a reload's new set may hold the same states (they never move).
  std::vector<std::shared_ptr<UpstreamState>> states_;
  std::vector<UpstreamOptions> options_;
};

}  // namespace relay::upstream
