// What one key may spend per period, and what it has spent.
//
// Spend is kept in integer nano-dollars: adding many small per-request costs as
// doubles drifts, and micro-dollars would round a 100-token request at
// $0.15 per million (1.5e-5 USD) to whole units. int64 nano-dollars hold over
// 9 billion USD.
//
// check() runs at admission and record() at settlement, both on every request,
// from any worker: the counters are atomics and the period boundary is one
// atomic read on the fast path. Only the roll-over into a new period takes this
// budget's mutex. Records for the new period are never lost: a thread sees the
// new period only after the counters were reset. A record stamped just before
// the boundary that races the roll-over is either dropped with the old period
// (where it belongs) or counted in the new one.
//
// A budget is checked before admission, not reserved: requests admitted while
// spend is below the cap may overshoot it by what they cost.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "relay/admission/budget_period.hpp"
#include "relay/admission/clock.hpp"

namespace relay::admission {

using NanoUsd = std::int64_t;

// Rounds to the nearest nano-dollar; negative, NaN and infinite amounts give 0
// and values beyond the range saturate.
NanoUsd toNanoUsd(double usd);
// "$12.00", "$0.005", "$3.141592654": at least two decimals, no trailing zeros beyond.
std::string formatUsd(NanoUsd amount);

// One key's caps, mapped from the config by the caller. Absent = no cap.
struct BudgetOptions {
  std::optional<double> usd;
  BudgetPeriod period = BudgetPeriod::kMonth;
  std::optional<std::uint64_t> maxInputTokens;
  std::optional<std::uint64_t> maxOutputTokens;
};

enum class BudgetLimit { kUsd, kInputTokens, kOutputTokens };

struct BudgetRefusal {
  BudgetLimit limit = BudgetLimit::kUsd;
  // "key 'planner' has spent its monthly budget of $12.00; it resets at
  // 2026-12-01T00:00:00Z" — for the 429 insufficient_quota body.
  std::string message;
  std::optional<WallTime> resetsAt;  // nullopt for a `total` budget
};

struct BudgetUsage {
  WallTime periodStart;
  NanoUsd spent = 0;
  std::uint64_t inputTokens = 0;
  std::uint64_t outputTokens = 0;
  bool operator==(const BudgetUsage&) const = default;
};

class Budget {
 public:
  Budget(std::string keyName, const BudgetOptions& options, WallTime now);
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;

  // Refuses once a cap has been reached (spend >= cap), the dollar cap first.
  std::optional<BudgetRefusal> check(WallTime now);

  // Adds a settled request's cost and usage to the period containing `now`.
  void record(double usd, std::uint64_t inputTokens, std::uint64_t outputTokens, WallTime now);
  void recordNanoUsd(NanoUsd cost, std::uint64_t inputTokens, std::uint64_t outputTokens,
                     WallTime now);

  // The current period's usage (rolling over first when `now` is past it).
  BudgetUsage usage(WallTime now);
  // The usage as stored, consistent with respect to roll-over (for the store).
  BudgetUsage snapshot() const;
  // Replaces the stored usage (the store, at load). `usage.periodStart` must
  // be the start of a period of this budget's kind.
  void restore(const BudgetUsage& usage);

  const std::string& keyName() const { return name_; }
  const BudgetOptions& options() const { return options_; }

 private:
  void rollOverIfDue(WallTime now);
  std::string refusalMessage(std::string_view what, std::string_view amount) const;

  std::string name_;
  BudgetOptions options_;
  NanoUsd usdCap_ = -1;  // -1: no dollar cap

  // Seconds since the Unix epoch. periodEnd_ is INT64_MAX for `total`.
  std::atomic<std::int64_t> periodStart_{0};
  std::atomic<std::int64_t> periodEnd_{0};
  std::atomic<NanoUsd> spent_{0};
  std::atomic<std::uint64_t> inputTokens_{0};
  std::atomic<std::uint64_t> outputTokens_{0};
  mutable std::mutex rollOver_;  // held only to roll over, restore and snapshot
};

}  // namespace relay::admission
