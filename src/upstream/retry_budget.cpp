#include "relay/upstream/retry_budget.hpp"

#include <algorithm>
#include <cmath>

namespace relay::upstream {
namespace {

constexpr std::uint64_t kMaxMicro = 0xFFFF'FFFFull;

std::uint32_t wrappedMs(SteadyTime now) {
  return static_cast<std::uint32_t>(steadyMs(now));
}

}  // namespace

RetryBudget::RetryBudget(const RetryBudgetOptions& options)
    : ratioMicro_(static_cast<std::uint64_t>(
          std::llround(std::clamp(options.ratio, 0.0, 1.0) * static_cast<double>(kMicro)))),
      memoryMs_(static_cast<double>(std::max<std::int64_t>(0, options.memory.count()))),
      hasFloor_(options.minPerSecond > 0),
      floor_(RateLimit::perSecond(options.minPerSecond),
             static_cast<std::uint32_t>(std::ceil(std::max(1.0, options.minPerSecond)))) {}

std::uint64_t RetryBudget::pack(std::uint64_t micro, std::uint32_t stampMs) {
  return (std::min(micro, kMaxMicro) << 32) | stampMs;
}

std::uint64_t RetryBudget::decayed(std::uint64_t word, std::uint32_t nowMs,
                                   std::uint32_t& stampMs) const {
  const std::uint64_t micro = word >> 32;
  const auto last = static_cast<std::uint32_t>(word);
  // Timestamps wrap every 49.7 days; the signed difference is right for any
  // gap under 24.8 days. A "negative" gap is a thread whose `now` was read a
  // little earlier than the last update's: it neither decays nor rewinds.
  const auto elapsed = static_cast<std::int32_t>(nowMs - last);
  if (elapsed <= 0 || micro == 0) {
    stampMs = elapsed < 0 ? last : nowMs;
    return micro;
  }
  stampMs = nowMs;
  if (memoryMs_ == 0) return micro;
  const double kept = static_cast<double>(micro) * std::exp(-elapsed / memoryMs_);
  return static_cast<std::uint64_t>(kept);  // rounds down: fading never creates credit
}

void RetryBudget::add(std::uint64_t micro, SteadyTime now) {
  const std::uint32_t nowMs = wrappedMs(now);
  std::uint64_t word = word_.load(std::memory_order_relaxed);
  for (;;) {
    std::uint32_t stamp = 0;
    // Two statements: `stamp` is an out-parameter of decayed(), so it must not
    // be read in the same full-expression (argument order is unspecified).
    const std::uint64_t balance = decayed(word, nowMs, stamp) + micro;
    const std::uint64_t next = pack(balance, stamp);
    if (word_.compare_exchange_weak(word, next, std::memory_order_relaxed)) return;
  }
}

void RetryBudget::onFirstAttempt(SteadyTime now) {
  if (ratioMicro_ > 0) add(ratioMicro_, now);
}

RetryGrant RetryBudget::tryRetry(SteadyTime now) {
  const std::uint32_t nowMs = wrappedMs(now);
  std::uint64_t word = word_.load(std::memory_order_relaxed);
  for (;;) {
    std::uint32_t stamp = 0;
    const std::uint64_t micro = decayed(word, nowMs, stamp);
    if (micro < kMicro) break;
    if (word_.compare_exchange_weak(word, pack(micro - kMicro, stamp), std::memory_order_relaxed)) {
      granted_.fetch_add(1, std::memory_order_relaxed);
      return RetryGrant::kDeposit;
    }
  }
  if (hasFloor_ && floor_.tryAcquire(now).admitted) {
    granted_.fetch_add(1, std::memory_order_relaxed);
    return RetryGrant::kFloor;
  }
  refused_.fetch_add(1, std::memory_order_relaxed);
  return RetryGrant::kRefused;
}

void RetryBudget::refund(RetryGrant grant, SteadyTime now) {
  if (grant == RetryGrant::kRefused) return;
  granted_.fetch_sub(1, std::memory_order_relaxed);
  if (grant == RetryGrant::kDeposit) {
    add(kMicro, now);
  } else {
    floor_.refund();
  }
}

double RetryBudget::balance(SteadyTime now) const {
  std::uint32_t stamp = 0;
  const std::uint64_t micro = decayed(word_.load(std::memory_order_relaxed), wrappedMs(now), stamp);
  return static_cast<double>(micro) / static_cast<double>(kMicro);
}

}  // namespace relay::upstream
