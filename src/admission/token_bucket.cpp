#include "relay/admission/token_bucket.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace relay::admission {
namespace {

__extension__ using Int128 = __int128;

// Debt beyond 73 years is as good as forever; the cap keeps now + debt in range.
constexpr std::int64_t kMaxDebt = std::int64_t{1} << 61;

std::int64_t nanosOf(SteadyTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::int64_t debtAt(std::int64_t tat, std::int64_t now) {
  return tat > now ? tat - now : 0;
}

std::int64_t clampDebt(Int128 debt) {
  return debt > kMaxDebt ? kMaxDebt : static_cast<std::int64_t>(debt);
}

}  // namespace

TokenBucket::TokenBucket(std::uint64_t ratePerMinute, std::uint64_t capacity)
    : rate_(ratePerMinute), capacity_(capacity == 0 ? ratePerMinute : capacity), nsPerToken_(0) {
  if (rate_ == 0) throw std::invalid_argument("token bucket rate must be at least 1 per minute");
  if (static_cast<std::uint64_t>(kNsPerMinute) % rate_ == 0) {
    nsPerToken_ = kNsPerMinute / static_cast<std::int64_t>(rate_);
  }
}

std::int64_t TokenBucket::spanCeil(std::uint64_t tokens) const {
  if (nsPerToken_ != 0 && tokens <= static_cast<std::uint64_t>(kMaxDebt / nsPerToken_)) {
    return static_cast<std::int64_t>(tokens) * nsPerToken_;
  }
  const Int128 scaled = Int128(tokens) * kNsPerMinute;
  return clampDebt((scaled + rate_ - 1) / rate_);
}

std::int64_t TokenBucket::spanFloor(std::uint64_t tokens) const {
  if (nsPerToken_ != 0 && tokens <= static_cast<std::uint64_t>(kMaxDebt / nsPerToken_)) {
    return static_cast<std::int64_t>(tokens) * nsPerToken_;
  }
  return clampDebt(Int128(tokens) * kNsPerMinute / rate_);
}

// With debt D the bucket holds capacity - D*rate/K tokens, so n tokens are
// there iff D*rate <= (capacity - n)*K; otherwise they will be after
// D - floor((capacity - n)*K / rate) ns, the least wait that satisfies it.
TakeResult TokenBucket::evaluate(std::uint64_t n, std::int64_t debt) const {
  if (n > capacity_) return {TakeStatus::kNever, std::chrono::nanoseconds(0)};
  const Int128 allowance = Int128(capacity_ - n) * kNsPerMinute;
  if (Int128(debt) * rate_ <= allowance) return {TakeStatus::kTaken, std::chrono::nanoseconds(0)};
  // allowance / rate < debt here, so the difference is positive and fits.
  const auto affordable = static_cast<std::int64_t>(allowance / rate_);
  return {TakeStatus::kWait, std::chrono::nanoseconds(debt - affordable)};
}

TakeResult TokenBucket::tryTake(std::uint64_t n, SteadyTime nowTime) {
  const std::int64_t now = nanosOf(nowTime);
  std::int64_t tat = tat_.load(std::memory_order_relaxed);
  for (;;) {
    const std::int64_t debt = debtAt(tat, now);
    TakeResult verdict = evaluate(n, debt);
    if (!verdict.taken()) return verdict;
    const std::int64_t next = now + clampDebt(Int128(debt) + spanCeil(n));
    // On failure `tat` is reloaded and the decision is made again from scratch.
    if (tat_.compare_exchange_weak(tat, next, std::memory_order_acq_rel,
                                   std::memory_order_relaxed)) {
      return verdict;
    }
  }
}

TakeResult TokenBucket::peek(std::uint64_t n, SteadyTime now) const {
  return evaluate(n, debtAt(tat_.load(std::memory_order_relaxed), nanosOf(now)));
}

void TokenBucket::refund(std::uint64_t n, SteadyTime nowTime) {
  if (n == 0) return;
  const std::int64_t now = nanosOf(nowTime);
  const std::int64_t back = spanFloor(n);
  std::int64_t tat = tat_.load(std::memory_order_relaxed);
  for (;;) {
    const std::int64_t debt = debtAt(tat, now);
    if (debt == 0) return;  // already full: a refund cannot lift it above capacity
    // Any tat_ <= now already means "full" to every operation (they all clamp
    // the debt at 0), so an excess refund cannot turn into credit; stopping at
    // `now` also keeps tat_ from drifting towards underflow.
    const std::int64_t next = now + std::max<std::int64_t>(debt - back, 0);
    if (tat_.compare_exchange_weak(tat, next, std::memory_order_acq_rel,
                                   std::memory_order_relaxed)) {
      return;
    }
  }
}

void TokenBucket::charge(std::uint64_t n, SteadyTime nowTime) {
  if (n == 0) return;
  const std::int64_t now = nanosOf(nowTime);
  const std::int64_t more = spanCeil(n);
  std::int64_t tat = tat_.load(std::memory_order_relaxed);
  for (;;) {
    const std::int64_t next = now + clampDebt(Int128(debtAt(tat, now)) + more);
    if (tat_.compare_exchange_weak(tat, next, std::memory_order_acq_rel,
                                   std::memory_order_relaxed)) {
      return;
    }
  }
}

std::int64_t TokenBucket::remaining(SteadyTime now) const {
  const std::int64_t debt = debtAt(tat_.load(std::memory_order_relaxed), nanosOf(now));
  // Tokens owed, rounded up, so that "remaining" rounds down. This runs for
  // every response (the headers): stay in 64 bits when the product fits.
  Int128 owed;
  std::uint64_t scaled = 0;
  if (!__builtin_mul_overflow(static_cast<std::uint64_t>(debt), rate_, &scaled) &&
      scaled <= std::numeric_limits<std::uint64_t>::max() - kNsPerMinute) {
    owed = (scaled + kNsPerMinute - 1) / kNsPerMinute;
  } else {
    owed = (Int128(debt) * rate_ + kNsPerMinute - 1) / kNsPerMinute;
  }
  const Int128 left = Int128(capacity_) - owed;
  constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  return left < kMin ? kMin : left > kMax ? kMax : static_cast<std::int64_t>(left);
}

std::chrono::nanoseconds TokenBucket::timeUntilFull(SteadyTime now) const {
  return std::chrono::nanoseconds(debtAt(tat_.load(std::memory_order_relaxed), nanosOf(now)));
}

}  // namespace relay::admission
