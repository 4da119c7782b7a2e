#include "relay/admission/budget.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

namespace relay::admission {
namespace {

constexpr NanoUsd kNanoPerUsd = 1'000'000'000;
// One record never adds more than a billion dollars, so sums cannot wrap.
constexpr double kMaxRecordUsd = 1e9;
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

std::int64_t secondsOf(WallTime t) {
  return std::chrono::floor<std::chrono::seconds>(t).time_since_epoch().count();
}

WallTime fromSeconds(std::int64_t s) {
  return WallTime(std::chrono::seconds(s));
}

std::int64_t endSeconds(BudgetPeriod period, WallTime start) {
  const std::optional<WallTime> end = periodEnd(period, start);
  return end ? secondsOf(*end) : kNever;
}

}  // namespace

NanoUsd toNanoUsd(double usd) {
  if (!(usd > 0)) return 0;  // also NaN
  if (usd >= kMaxRecordUsd) return static_cast<NanoUsd>(kMaxRecordUsd) * kNanoPerUsd;
  return std::llround(usd * static_cast<double>(kNanoPerUsd));
}

std::string formatUsd(NanoUsd amount) {
  const bool negative = amount < 0;
  // Unsigned, so that even the most negative value has a magnitude.
  const std::uint64_t magnitude =
      negative ? 0 - static_cast<std::uint64_t>(amount) : static_cast<std::uint64_t>(amount);
  std::string fraction = std::to_string(magnitude % kNanoPerUsd);
  fraction.insert(0, 9 - fraction.size(), '0');
  while (fraction.size() > 2 && fraction.back() == '0')
    fraction.pop_back();
  return (negative ? "-$" : "$") + std::to_string(magnitude / kNanoPerUsd) + "." + fraction;
}

namespace {

std::string resetTextAt(std::optional<WallTime> resetsAt) {
  if (!resetsAt) return "it does not reset";
  return "it resets at " + formatUtc(*resetsAt);
}

}  // namespace

BudgetRefusal budgetSpentRefusal(std::string_view keyName, const BudgetOptions& o,
                                 BudgetLimit limit, std::optional<WallTime> resetsAt) {
  std::string what, amount;
  switch (limit) {
    case BudgetLimit::kUsd:
      what = "budget";
      amount = formatUsd(toNanoUsd(o.usd.value_or(0)));
      break;
    case BudgetLimit::kInputTokens:
      what = "input-token budget";
      amount = std::to_string(o.maxInputTokens.value_or(0)) + " tokens";
      break;
    case BudgetLimit::kOutputTokens:
      what = "output-token budget";
      amount = std::to_string(o.maxOutputTokens.value_or(0)) + " tokens";
      break;
  }
  std::string message = "key '" + std::string(keyName) + "' has ";
  message += limit == BudgetLimit::kUsd ? "spent its " : "used its ";
  message += periodAdjective(o.period);
  message += ' ';
  message += what;
  message += " of ";
  message += amount;
  message += "; " + resetTextAt(resetsAt);
  return BudgetRefusal{limit, std::move(message), resetsAt};
}

BudgetRefusal budgetShortRefusal(std::string_view keyName, const BudgetOptions& o,
                                 BudgetLimit limit, std::uint64_t left, const BudgetAsk& ask,
                                 std::optional<WallTime> resetsAt) {
  const std::string key(keyName);
  const std::string period(periodAdjective(o.period));
  std::string message;
  switch (limit) {
    case BudgetLimit::kUsd:
      message = "key '" + key + "' has " + formatUsd(static_cast<NanoUsd>(left)) + " left of its " +
                period + " budget of " + formatUsd(toNanoUsd(o.usd.value_or(0))) +
                " (after what was spent and what requests in flight hold), and this request "
                "could cost up to " +
                formatUsd(ask.usd) +
                " (its estimated prompt plus max_tokens at this model's prices); lower "
                "max_tokens, or wait: " +
                resetTextAt(resetsAt);
      break;
    case BudgetLimit::kInputTokens:
      message = "key '" + key + "' has " + std::to_string(left) + " input tokens left of its " +
                period + " input-token budget of " + std::to_string(o.maxInputTokens.value_or(0)) +
                ", and this request's prompt is estimated at " + std::to_string(ask.inputTokens) +
                " tokens; " + resetTextAt(resetsAt);
      break;
    case BudgetLimit::kOutputTokens:
      message = "key '" + key + "' has " + std::to_string(left) + " output tokens left of its " +
                period + " output-token budget of " +
                std::to_string(o.maxOutputTokens.value_or(0)) +
                ", and this request may produce up to " + std::to_string(ask.outputTokens) +
                " (max_tokens); lower max_tokens, or wait: " + resetTextAt(resetsAt);
      break;
  }
  return BudgetRefusal{limit, std::move(message), resetsAt};
}

Budget::Budget(std::string keyName, const BudgetOptions& options, WallTime now)
    : name_(std::move(keyName)), options_(options) {
  if (options_.usd) usdCap_ = toNanoUsd(*options_.usd);
  const WallTime start = periodStart(options_.period, now);
  periodStart_.store(secondsOf(start), std::memory_order_relaxed);
  periodEnd_.store(endSeconds(options_.period, start), std::memory_order_relaxed);
}

void Budget::rollOverIfDue(WallTime now) {
  const std::int64_t nowSec = secondsOf(now);
  // Fast path: one atomic load. Acquire pairs with the release below, so a
  // thread that sees the new end also sees the reset counters.
  if (nowSec < periodEnd_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(rollOver_);
  if (nowSec < periodEnd_.load(std::memory_order_relaxed)) return;  // another thread did it
  const WallTime start = periodStart(options_.period, now);
  // The old period's settled spend leaves `committed`; holds of requests in
  // flight stay (they settle into the new period). Exchange + subtract keeps
  // this exact against settlements and reservations running meanwhile.
  committedUsd_.fetch_sub(spent_.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
  committedInput_.fetch_sub(inputTokens_.exchange(0, std::memory_order_relaxed),
                            std::memory_order_relaxed);
  committedOutput_.fetch_sub(outputTokens_.exchange(0, std::memory_order_relaxed),
                             std::memory_order_relaxed);
  periodStart_.store(secondsOf(start), std::memory_order_relaxed);
  periodEnd_.store(endSeconds(options_.period, start), std::memory_order_release);
}

std::optional<BudgetRefusal> Budget::check(WallTime now) {
  rollOverIfDue(now);
  const std::int64_t end = periodEnd_.load(std::memory_order_relaxed);
  const std::optional<WallTime> resetsAt =
      end == kNever ? std::nullopt : std::optional<WallTime>(fromSeconds(end));
  if (usdCap_ >= 0 && committedUsd_.load(std::memory_order_relaxed) >= usdCap_)
    return budgetSpentRefusal(name_, options_, BudgetLimit::kUsd, resetsAt);
  if (options_.maxInputTokens &&
      committedInput_.load(std::memory_order_relaxed) >= *options_.maxInputTokens)
    return budgetSpentRefusal(name_, options_, BudgetLimit::kInputTokens, resetsAt);
  if (options_.maxOutputTokens &&
      committedOutput_.load(std::memory_order_relaxed) >= *options_.maxOutputTokens)
    return budgetSpentRefusal(name_, options_, BudgetLimit::kOutputTokens, resetsAt);
  return std::nullopt;
}

namespace {

// Adds `ask` to `committed` if the sum stays within `cap` (one CAS loop).
// `left` receives what was left when refused.
template <class T>
bool holdWithin(std::atomic<T>& committed, T ask, std::optional<T> cap, T& left) {
  T c = committed.load(std::memory_order_relaxed);
  for (;;) {
    if (cap && (c > *cap || ask > *cap - c)) {
      left = c >= *cap ? T{0} : *cap - c;
      return false;
    }
    if (committed.compare_exchange_weak(c, c + ask, std::memory_order_relaxed)) return true;
  }
}

}  // namespace

std::variant<BudgetHold, BudgetRefusal> Budget::reserve(const BudgetAsk& ask, WallTime now) {
  rollOverIfDue(now);
  const std::int64_t end = periodEnd_.load(std::memory_order_relaxed);
  const std::optional<WallTime> resetsAt =
      end == kNever ? std::nullopt : std::optional<WallTime>(fromSeconds(end));
  NanoUsd usdLeft = 0;
  const std::optional<NanoUsd> usdCap =
      usdCap_ >= 0 ? std::optional<NanoUsd>(usdCap_) : std::nullopt;
  if (!holdWithin(committedUsd_, std::max<NanoUsd>(ask.usd, 0), usdCap, usdLeft)) {
    return budgetShortRefusal(name_, options_, BudgetLimit::kUsd,
                              static_cast<std::uint64_t>(usdLeft), ask, resetsAt);
  }
  std::uint64_t tokensLeft = 0;
  if (!holdWithin(committedInput_, ask.inputTokens, options_.maxInputTokens, tokensLeft)) {
    committedUsd_.fetch_sub(std::max<NanoUsd>(ask.usd, 0), std::memory_order_relaxed);
    return budgetShortRefusal(name_, options_, BudgetLimit::kInputTokens, tokensLeft, ask,
                              resetsAt);
  }
  if (!holdWithin(committedOutput_, ask.outputTokens, options_.maxOutputTokens, tokensLeft)) {
    committedUsd_.fetch_sub(std::max<NanoUsd>(ask.usd, 0), std::memory_order_relaxed);
    committedInput_.fetch_sub(ask.inputTokens, std::memory_order_relaxed);
    return budgetShortRefusal(name_, options_, BudgetLimit::kOutputTokens, tokensLeft, ask,
                              resetsAt);
  }
  BudgetAsk held = ask;
  held.usd = std::max<NanoUsd>(ask.usd, 0);
  return BudgetHold(this, held);
}

std::optional<double> Budget::settleHold(const BudgetAsk& held, const BudgetAsk& actual,
                                         WallTime now) {
  rollOverIfDue(now);
  const NanoUsd usd = std::max<NanoUsd>(actual.usd, 0);
  // Spent first, then the hold becomes the actual: a reservation racing this
  // sees, at worst, both for an instant — never less than the truth.
  const NanoUsd usdBefore = usd > 0 ? spent_.fetch_add(usd, std::memory_order_relaxed) : 0;
  const std::uint64_t inBefore =
      actual.inputTokens ? inputTokens_.fetch_add(actual.inputTokens, std::memory_order_relaxed)
                         : 0;
  const std::uint64_t outBefore =
      actual.outputTokens ? outputTokens_.fetch_add(actual.outputTokens, std::memory_order_relaxed)
                          : 0;
  committedUsd_.fetch_add(usd - held.usd, std::memory_order_relaxed);
  // Unsigned wrap-around adds the (possibly negative) difference exactly.
  committedInput_.fetch_add(actual.inputTokens - held.inputTokens, std::memory_order_relaxed);
  committedOutput_.fetch_add(actual.outputTokens - held.outputTokens, std::memory_order_relaxed);

  // Did this settlement carry a cap's spend across the warning share?
  std::optional<double> crossed;
  auto check = [&](double before, double added, std::optional<double> cap) {
    if (!cap || *cap <= 0 || added <= 0) return;
    const double warn = BudgetHold::kWarnFraction * *cap;
    if (before < warn && before + added >= warn) {
      crossed = std::max(crossed.value_or(0), (before + added) / *cap);
    }
  };
  check(static_cast<double>(usdBefore), static_cast<double>(usd),
        usdCap_ > 0 ? std::optional<double>(static_cast<double>(usdCap_)) : std::nullopt);
  check(static_cast<double>(inBefore), static_cast<double>(actual.inputTokens),
        options_.maxInputTokens
            ? std::optional<double>(static_cast<double>(*options_.maxInputTokens))
            : std::nullopt);
  check(static_cast<double>(outBefore), static_cast<double>(actual.outputTokens),
        options_.maxOutputTokens
            ? std::optional<double>(static_cast<double>(*options_.maxOutputTokens))
            : std::nullopt);
  return crossed;
}

void Budget::recordNanoUsd(NanoUsd cost, std::uint64_t inputTokens, std::uint64_t outputTokens,
                           WallTime now) {
  settleHold(BudgetAsk{}, BudgetAsk{cost, inputTokens, outputTokens}, now);
}

void Budget::raiseSpentTo(const BudgetUsage& shared, WallTime now) {
  rollOverIfDue(now);
  if (periodStart_.load(std::memory_order_acquire) != secondsOf(shared.periodStart)) return;
  auto raise = [](auto& spent, auto& committed, auto target) {
    auto current = spent.load(std::memory_order_relaxed);
    while (current < target) {
      if (spent.compare_exchange_weak(current, target, std::memory_order_relaxed)) {
        committed.fetch_add(target - current, std::memory_order_relaxed);
        return;
      }
    }
  };
  raise(spent_, committedUsd_, shared.spent);
  raise(inputTokens_, committedInput_, shared.inputTokens);
  raise(outputTokens_, committedOutput_, shared.outputTokens);
}

BudgetUsage Budget::settledSoFar() const {
  return BudgetUsage{fromSeconds(periodStart_.load(std::memory_order_acquire)),
                     spent_.load(std::memory_order_relaxed),
                     inputTokens_.load(std::memory_order_relaxed),
                     outputTokens_.load(std::memory_order_relaxed)};
}

BudgetUsage Budget::usage(WallTime now) {
  rollOverIfDue(now);
  return snapshot();
}

BudgetAsk Budget::held() const {
  return BudgetAsk{
      committedUsd_.load(std::memory_order_relaxed) - spent_.load(std::memory_order_relaxed),
      committedInput_.load(std::memory_order_relaxed) -
          inputTokens_.load(std::memory_order_relaxed),
      committedOutput_.load(std::memory_order_relaxed) -
          outputTokens_.load(std::memory_order_relaxed)};
}

BudgetUsage Budget::snapshot() const {
  std::lock_guard lock(rollOver_);
  return BudgetUsage{fromSeconds(periodStart_.load(std::memory_order_relaxed)),
                     spent_.load(std::memory_order_relaxed),
                     inputTokens_.load(std::memory_order_relaxed),
                     outputTokens_.load(std::memory_order_relaxed)};
}

void Budget::restore(const BudgetUsage& usage) {
  std::lock_guard lock(rollOver_);
  const WallTime start = periodStart(options_.period, usage.periodStart);
  // Holds of requests in flight (none at start-up) stay on top of the restored spend.
  const BudgetAsk holds = held();
  spent_.store(usage.spent, std::memory_order_relaxed);
  inputTokens_.store(usage.inputTokens, std::memory_order_relaxed);
  outputTokens_.store(usage.outputTokens, std::memory_order_relaxed);
  committedUsd_.store(usage.spent + holds.usd, std::memory_order_relaxed);
  committedInput_.store(usage.inputTokens + holds.inputTokens, std::memory_order_relaxed);
  committedOutput_.store(usage.outputTokens + holds.outputTokens, std::memory_order_relaxed);
  periodStart_.store(secondsOf(start), std::memory_order_relaxed);
  periodEnd_.store(endSeconds(options_.period, start), std::memory_order_release);
}

BudgetHold::BudgetHold(BudgetHold&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)),
      held_(other.held_),
      usedSoFar_(other.usedSoFar_) {}

BudgetHold& BudgetHold::operator=(BudgetHold&& other) noexcept {
  if (this != &other) {
    if (budget_) budget_->settleHold(held_, usedSoFar_, SystemClock::instance().wallNow());
    budget_ = std::exchange(other.budget_, nullptr);
    held_ = other.held_;
    usedSoFar_ = other.usedSoFar_;
  }
  return *this;
}

BudgetHold::~BudgetHold() {
  if (budget_) budget_->settleHold(held_, usedSoFar_, SystemClock::instance().wallNow());
}

std::optional<double> BudgetHold::settle(const BudgetAsk& actual, WallTime now) {
  if (!budget_) return std::nullopt;
  return std::exchange(budget_, nullptr)->settleHold(held_, actual, now);
}

}  // namespace relay::admission
