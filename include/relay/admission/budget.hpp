// What one key may spend per period, and what it has spent.
//
// Spend is kept in integer nano-dollars: adding many small per-request costs as
// doubles drifts, and micro-dollars would round a 100-token request at
// $0.15 per million (1.5e-5 USD) to whole units. int64 nano-dollars hold over
// 9 billion USD.
//
// Budgets are a hard ceiling under any parallelism: admission *reserves* the
// most a request can cost (reserve()), atomically with the check, and the
// request settles to its real cost when it ends (BudgetHold::settle). Each
// dimension (nano-dollars, input tokens, output tokens) keeps two counters:
// `spent` (settled) and `committed` (settled + held by requests in flight).
// A reservation is one compare-exchange on `committed` against the cap, so 40
// parallel requests against a nearly spent budget are admitted only while
// their worst cases fit; spend can exceed the cap only by what a request costs
// beyond its own reservation (an under-estimated prompt), never by parallelism.
//
// Every call may come from any worker: the counters are atomics and the
// period boundary is one atomic read on the fast path. Only the roll-over
// into a new period takes this budget's mutex; it moves the old period's
// settled spend out of `committed` and keeps the holds of requests still in
// flight, which settle into the new period.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

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

// The most one request may cost, held at admission.
struct BudgetAsk {
  NanoUsd usd = 0;
  std::uint64_t inputTokens = 0;
  std::uint64_t outputTokens = 0;
};

// The refusals, worded the same wherever the decision was made (this
// process's budget or the shared one in Redis). `left` is nano-dollars for
// kUsd, tokens otherwise.
BudgetRefusal budgetSpentRefusal(std::string_view keyName, const BudgetOptions& options,
                                 BudgetLimit limit, std::optional<WallTime> resetsAt);
BudgetRefusal budgetShortRefusal(std::string_view keyName, const BudgetOptions& options,
                                 BudgetLimit limit, std::uint64_t left, const BudgetAsk& ask,
                                 std::optional<WallTime> resetsAt);

class Budget;

// A request's reservation against its key's budget. Settle it once with the
// real cost; dropped unsettled it releases the hold and charges what
// setUsedSoFar() last said (nothing by default).
class BudgetHold {
 public:
  static constexpr double kWarnFraction = 0.8;
  BudgetHold() = default;
  BudgetHold(BudgetHold&& other) noexcept;
  BudgetHold& operator=(BudgetHold&& other) noexcept;
  BudgetHold(const BudgetHold&) = delete;
  BudgetHold& operator=(const BudgetHold&) = delete;
  ~BudgetHold();

  bool active() const { return budget_ != nullptr; }
  const BudgetAsk& held() const { return held_; }
  void setUsedSoFar(const BudgetAsk& used) { usedSoFar_ = used; }
  // Moves the hold to the real cost. Later calls do nothing. Returns the
  // share of a cap now spent when this settlement carried the spend across
  // kWarnFraction of it (for the event stream), else nullopt.
  std::optional<double> settle(const BudgetAsk& actual, WallTime now);

 private:
  friend class Budget;
  BudgetHold(Budget* budget, const BudgetAsk& held) : budget_(budget), held_(held) {}
  Budget* budget_ = nullptr;
  BudgetAsk held_;
  BudgetAsk usedSoFar_;
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

  // Refuses once a cap has been reached (spent + held >= cap), the dollar cap first.
  std::optional<BudgetRefusal> check(WallTime now);

  // Holds `ask` if it fits under every cap (spent + held + ask <= cap), else
  // refuses with what is left and when the period resets. Uncapped
  // dimensions are held too (so that a reload adding a cap counts them).
  std::variant<BudgetHold, BudgetRefusal> reserve(const BudgetAsk& ask, WallTime now);

  // Adds a settled request's cost and usage to the period containing `now`.
  void recordNanoUsd(NanoUsd cost, std::uint64_t inputTokens, std::uint64_t outputTokens,
                     WallTime now);

  // The current period's settled usage (rolling over first when `now` is past it).
  BudgetUsage usage(WallTime now);
  // What requests in flight hold now (committed - spent).
  BudgetAsk held() const;
  // The usage as stored, consistent with respect to roll-over (for the store).
  BudgetUsage snapshot() const;
  // The settled usage without taking the roll-over lock (may straddle a
  // roll-over for an instant; for the shared store's floor).
  BudgetUsage settledSoFar() const;
  // Raises this period's settled usage to at least `shared` (the spend every
  // replica saw in Redis), so that a replica falling back to its own state
  // still knows what the key spent. Ignored for another period.
  void raiseSpentTo(const BudgetUsage& shared, WallTime now);
  // Replaces the stored usage (the store, at load). `usage.periodStart` must
  // be the start of a period of this budget's kind.
  void restore(const BudgetUsage& usage);

  const std::string& keyName() const { return name_; }
  const BudgetOptions& options() const { return options_; }

 private:
  friend class BudgetHold;
  void rollOverIfDue(WallTime now);
  std::optional<double> settleHold(const BudgetAsk& held, const BudgetAsk& actual, WallTime now);

  std::string name_;
  BudgetOptions options_;
  NanoUsd usdCap_ = -1;  // -1: no dollar cap

  // Seconds since the Unix epoch. periodEnd_ is INT64_MAX for `total`.
  std::atomic<std::int64_t> periodStart_{0};
  std::atomic<std::int64_t> periodEnd_{0};
  std::atomic<NanoUsd> spent_{0};
  std::atomic<std::uint64_t> inputTokens_{0};
  std::atomic<std::uint64_t> outputTokens_{0};
  // spent + held, per dimension: what reservations are checked against.
  std::atomic<NanoUsd> committedUsd_{0};
  std::atomic<std::uint64_t> committedInput_{0};
  std::atomic<std::uint64_t> committedOutput_{0};
  mutable std::mutex rollOver_;  // held only to roll over, restore and snapshot
};

}  // namespace relay::admission
