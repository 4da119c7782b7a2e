#include "relay/admission/budget.hpp"

#include <chrono>
#include <cmath>
#include <limits>

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
  // thread that sees the new end also sees the zeroed counters.
  if (nowSec < periodEnd_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(rollOver_);
  if (nowSec < periodEnd_.load(std::memory_order_relaxed)) return;  // another thread did it
  const WallTime start = periodStart(options_.period, now);
  spent_.store(0, std::memory_order_relaxed);
  inputTokens_.store(0, std::memory_order_relaxed);
  outputTokens_.store(0, std::memory_order_relaxed);
  periodStart_.store(secondsOf(start), std::memory_order_relaxed);
  periodEnd_.store(endSeconds(options_.period, start), std::memory_order_release);
}

std::string Budget::refusalMessage(std::string_view what, std::string_view amount) const {
  std::string message = "key '" + name_ + "' has ";
  message += what == "budget" ? "spent its " : "used its ";
  message += periodAdjective(options_.period);
  message += ' ';
  message += what;
  message += " of ";
  message += amount;
  const std::int64_t end = periodEnd_.load(std::memory_order_relaxed);
  if (end == kNever) {
    message += "; it does not reset";
  } else {
    message += "; it resets at " + formatUtc(fromSeconds(end));
  }
  return message;
}

std::optional<BudgetRefusal> Budget::check(WallTime now) {
  rollOverIfDue(now);
  const std::int64_t end = periodEnd_.load(std::memory_order_relaxed);
  const std::optional<WallTime> resetsAt =
      end == kNever ? std::nullopt : std::optional<WallTime>(fromSeconds(end));
  if (usdCap_ >= 0 && spent_.load(std::memory_order_relaxed) >= usdCap_) {
    return BudgetRefusal{BudgetLimit::kUsd, refusalMessage("budget", formatUsd(usdCap_)), resetsAt};
  }
  if (options_.maxInputTokens &&
      inputTokens_.load(std::memory_order_relaxed) >= *options_.maxInputTokens) {
    return BudgetRefusal{
        BudgetLimit::kInputTokens,
        refusalMessage("input-token budget", std::to_string(*options_.maxInputTokens) + " tokens"),
        resetsAt};
  }
  if (options_.maxOutputTokens &&
      outputTokens_.load(std::memory_order_relaxed) >= *options_.maxOutputTokens) {
    return BudgetRefusal{BudgetLimit::kOutputTokens,
                         refusalMessage("output-token budget",
                                        std::to_string(*options_.maxOutputTokens) + " tokens"),
                         resetsAt};
  }
  return std::nullopt;
}

void Budget::record(double usd, std::uint64_t inputTokens, std::uint64_t outputTokens,
                    WallTime now) {
  recordNanoUsd(toNanoUsd(usd), inputTokens, outputTokens, now);
}

void Budget::recordNanoUsd(NanoUsd cost, std::uint64_t inputTokens, std::uint64_t outputTokens,
                           WallTime now) {
  rollOverIfDue(now);
  if (cost > 0) spent_.fetch_add(cost, std::memory_order_relaxed);
  if (inputTokens != 0) inputTokens_.fetch_add(inputTokens, std::memory_order_relaxed);
  if (outputTokens != 0) outputTokens_.fetch_add(outputTokens, std::memory_order_relaxed);
}

BudgetUsage Budget::usage(WallTime now) {
  rollOverIfDue(now);
  return snapshot();
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
  spent_.store(usage.spent, std::memory_order_relaxed);
  inputTokens_.store(usage.inputTokens, std::memory_order_relaxed);
  outputTokens_.store(usage.outputTokens, std::memory_order_relaxed);
  periodStart_.store(secondsOf(start), std::memory_order_relaxed);
  periodEnd_.store(endSeconds(options_.period, start), std::memory_order_release);
}

}  // namespace relay::admission
