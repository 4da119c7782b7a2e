// A token bucket with continuous refill, kept in one 64-bit atomic word so that
// every worker thread can take from the same hot key without a lock.
//
// Representation (the "theoretical arrival time" of GCRA): instead of the pair
// (tokens, time of last refill) the bucket stores one instant, `tat_`, the time
// at which it will be full again if nothing else happens. At time `now`:
//
//   debt    D = max(tat_ - now, 0)            nanoseconds of refill still owed
//   tokens    = capacity - D * rate / 1 min   fractional; below 0 while in debt
//
// Refill therefore needs no write (time passing shrinks D); taking n tokens
// moves tat_ to now + D + n * 1 min / rate; the time until full is D, and the
// time until n tokens are there is D - (capacity - n) * 1 min / rate. Every
// operation is one load, a little integer arithmetic and, for the ones that
// change the bucket, one compare-exchange that retries only if another thread
// changed the bucket in between. Refusals write nothing.
//
// Precision: times are integer nanoseconds. Admission compares exactly in
// 128-bit integers (tokens scaled by 60e9 ns), so "admit" and "wait" are exact
// to the nanosecond; turning tokens into time rounds against the caller
// (takes and charges round up, refunds round down), so rounding can delay a
// later request by at most 1 ns per operation but never creates a token.
// When 60e9 is a multiple of the rate (600, 200000, ...) there is no rounding.
//
// Times must be non-negative (steady_clock counts from boot); debt is capped at
// 2^61 ns so that tat_ cannot overflow.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "relay/admission/clock.hpp"

namespace relay::admission {

enum class TakeStatus {
  kTaken,  // the tokens are gone
  kWait,   // not enough now; `wait` is exactly how long until there will be
  kNever,  // more than the bucket's capacity: no amount of waiting helps
};

struct TakeResult {
  TakeStatus status = TakeStatus::kTaken;
  std::chrono::nanoseconds wait{0};  // > 0 for kWait, 0 otherwise
  bool taken() const { return status == TakeStatus::kTaken; }
};

class TokenBucket {
 public:
  static constexpr std::int64_t kNsPerMinute = 60'000'000'000;

  // `ratePerMinute` >= 1 tokens refill per minute, continuously; `capacity` is
  // the burst (0 means equal to the rate). Starts full. Throws
  // std::invalid_argument for a zero rate.
  explicit TokenBucket(std::uint64_t ratePerMinute, std::uint64_t capacity = 0);
  TokenBucket(const TokenBucket&) = delete;
  TokenBucket& operator=(const TokenBucket&) = delete;

  // Takes `n` tokens if the bucket holds at least `n` at `now`.
  TakeResult tryTake(std::uint64_t n, SteadyTime now);

  // What tryTake would answer, without taking: kTaken (wait 0) means "now".
  TakeResult peek(std::uint64_t n, SteadyTime now) const;

  // Puts `n` tokens back (never above capacity).
  void refund(std::uint64_t n, SteadyTime now);

  // Takes `n` more tokens unconditionally; the bucket may go below zero, and
  // that debt delays later requests until refill has paid it off.
  void charge(std::uint64_t n, SteadyTime now);

  // Whole tokens in the bucket (rounded down); negative while in debt.
  std::int64_t remaining(SteadyTime now) const;

  // Time until the bucket is full again (0 when it is).
  std::chrono::nanoseconds timeUntilFull(SteadyTime now) const;

  std::uint64_t ratePerMinute() const { return rate_; }
  std::uint64_t capacity() const { return capacity_; }

 private:
  std::int64_t spanCeil(std::uint64_t tokens) const;   // ns to refill `tokens`, rounded up
  std::int64_t spanFloor(std::uint64_t tokens) const;  // same, rounded down
  TakeResult evaluate(std::uint64_t n, std::int64_t debt) const;

  std::atomic<std::int64_t> tat_{0};  // ns since the steady epoch; <= now means full
  std::uint64_t rate_;
  std::uint64_t capacity_;
  std::int64_t nsPerToken_;  // 60e9 / rate when exact, else 0 (128-bit path)
};

}  // namespace relay::admission
