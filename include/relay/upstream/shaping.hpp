// Per-upstream shaping: a cap on requests in flight and a requests-per-minute
// rate, so the gateway stays inside each provider's tier instead of collecting
// its 429s. Both are shared by every worker and lock-free.
//
// The rate is GCRA (the "virtual scheduling" form of a token bucket, ITU-T
// I.371): one atomic "theoretical arrival time" instead of a token count and a
// refill timestamp, so an admission is a single CAS and a refusal knows the
// exact instant the next request would be admitted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

#include "relay/upstream/time.hpp"

namespace relay::upstream {

struct ShapingOptions {
  std::uint32_t maxConcurrency = 0;  // in-flight requests; 0 = unlimited
  std::uint32_t rpm = 0;             // requests per minute; 0 = unlimited
  // Requests that may go out at once after a quiet spell; 0 = one second's
  // worth (rpm / 60, at least 1). Providers may enforce a per-minute limit over
  // shorter windows (OpenAI documents 60,000/min enforced as 1,000/s), so a
  // burst of a full minute's quota would draw 429s; one second's worth does not.
  std::uint32_t rpmBurst = 0;
};

// The burst `options` asks for, with the default applied.
std::uint32_t effectiveRpmBurst(const ShapingOptions& options);

class ConcurrencyLimit;

// One in-flight slot; releases it when destroyed. Move-only. Must not outlive
// its ConcurrencyLimit (both live for the request's config snapshot).
class ConcurrencyPermit {
 public:
  ConcurrencyPermit() = default;
  ConcurrencyPermit(ConcurrencyPermit&& other) noexcept : counter_(other.counter_) {
    other.counter_ = nullptr;
  }
  ConcurrencyPermit& operator=(ConcurrencyPermit&& other) noexcept;
  ConcurrencyPermit(const ConcurrencyPermit&) = delete;
  ConcurrencyPermit& operator=(const ConcurrencyPermit&) = delete;
  ~ConcurrencyPermit() { release(); }

  explicit operator bool() const { return counter_ != nullptr; }
  void release();

 private:
  friend class ConcurrencyLimit;
  explicit ConcurrencyPermit(std::atomic<std::uint32_t>* counter) : counter_(counter) {}
  std::atomic<std::uint32_t>* counter_ = nullptr;
};

class ConcurrencyLimit {
 public:
  explicit ConcurrencyLimit(std::uint32_t max = 0) : max_(max) {}
  ConcurrencyLimit(const ConcurrencyLimit&) = delete;
  ConcurrencyLimit& operator=(const ConcurrencyLimit&) = delete;

  // An empty permit when `max` requests are already in flight. With no limit
  // the count is still kept (for the in-flight gauge).
  ConcurrencyPermit tryAcquire();

  std::uint32_t inFlight() const { return inFlight_.load(std::memory_order_relaxed); }
  std::uint32_t max() const { return max_; }

 private:
  const std::uint32_t max_;
  std::atomic<std::uint32_t> inFlight_{0};
};

class RateLimit {
 public:
  struct Result {
    bool admitted = true;
    SteadyTime retryAt{};  // refused: the earliest instant an admission can succeed
  };

  // No limit: every request is admitted.
  RateLimit() = default;
  // One admission per `interval` on average, up to `burst` back to back. The
  // limit starts full: `burst` admissions are available at once.
  RateLimit(std::chrono::nanoseconds interval, std::uint32_t burst);
  RateLimit(const RateLimit&) = delete;
  RateLimit& operator=(const RateLimit&) = delete;

  // ceil(60 s / rpm): rounding up keeps the long-run rate at or below rpm.
  static std::chrono::nanoseconds perMinute(std::uint32_t rpm);
  // ceil(1 s / rate), for fractional rates such as 0.5 per second.
  static std::chrono::nanoseconds perSecond(double rate);

  Result tryAcquire(SteadyTime now);
  // Returns one admission that was not used (the request was not sent). Exact
  // for the last admission; harmless otherwise.
  void refund();

  bool unlimited() const { return intervalNs_ == 0; }
  std::chrono::nanoseconds interval() const { return std::chrono::nanoseconds(intervalNs_); }

 private:
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::min();
  const std::int64_t intervalNs_ = 0;
  const std::int64_t toleranceNs_ = 0;  // (burst - 1) * interval
  // Theoretical arrival time of the next admission, ns on the steady clock.
  std::atomic<std::int64_t> tat_{kNever};
};

}  // namespace relay::upstream
