#include "relay/upstream/shaping.hpp"

#include <algorithm>
#include <cmath>

namespace relay::upstream {

std::uint32_t effectiveRpmBurst(const ShapingOptions& options) {
  if (options.rpmBurst > 0) return options.rpmBurst;
  return std::max<std::uint32_t>(1, options.rpm / 60);
}

ConcurrencyPermit& ConcurrencyPermit::operator=(ConcurrencyPermit&& other) noexcept {
  if (this != &other) {
    release();
    counter_ = other.counter_;
    other.counter_ = nullptr;
  }
  return *this;
}

void ConcurrencyPermit::release() {
  if (counter_) counter_->fetch_sub(1, std::memory_order_release);
  counter_ = nullptr;
}

ConcurrencyPermit ConcurrencyLimit::tryAcquire() {
  // A CAS loop, not fetch_add-then-undo: an optimistic increment past the cap
  // would make a concurrent acquirer see the limit full when it is not.
  std::uint32_t current = inFlight_.load(std::memory_order_relaxed);
  do {
    if (max_ != 0 && current >= max_) return ConcurrencyPermit();
  } while (!inFlight_.compare_exchange_weak(current, current + 1, std::memory_order_acquire,
                                            std::memory_order_relaxed));
  return ConcurrencyPermit(&inFlight_);
}

RateLimit::RateLimit(std::chrono::nanoseconds interval, std::uint32_t burst)
    : intervalNs_(std::max<std::int64_t>(0, interval.count())),
      toleranceNs_(intervalNs_ *
                   (static_cast<std::int64_t>(std::max<std::uint32_t>(1, burst)) - 1)) {}

std::chrono::nanoseconds RateLimit::perMinute(std::uint32_t rpm) {
  if (rpm == 0) return std::chrono::nanoseconds(0);
  constexpr std::int64_t kMinute = 60'000'000'000;
  return std::chrono::nanoseconds((kMinute + rpm - 1) / rpm);
}

std::chrono::nanoseconds RateLimit::perSecond(double rate) {
  if (!(rate > 0)) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::ceil(1e9 / rate)));
}

RateLimit::Result RateLimit::tryAcquire(SteadyTime now) {
  if (intervalNs_ == 0) return {};
  const std::int64_t t =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  std::int64_t tat = tat_.load(std::memory_order_relaxed);
  for (;;) {
    // An idle limit does not bank credit beyond its burst: arrivals are
    // scheduled from max(tat, now), and at most `tolerance` ahead of now.
    const std::int64_t start = std::max(tat, t);
    if (start - t > toleranceNs_) {
      return Result{false, SteadyTime(std::chrono::duration_cast<SteadyTime::duration>(
                               std::chrono::nanoseconds(start - toleranceNs_)))};
    }
    if (tat_.compare_exchange_weak(tat, start + intervalNs_, std::memory_order_relaxed)) return {};
  }
}

void RateLimit::refund() {
  if (intervalNs_ == 0) return;
  std::int64_t tat = tat_.load(std::memory_order_relaxed);
  while (tat != kNever &&
         !tat_.compare_exchange_weak(tat, tat - intervalNs_, std::memory_order_relaxed)) {
  }
}

}  // namespace relay::upstream
