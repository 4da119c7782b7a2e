// A retry budget per upstream (the Finagle/Envoy idea): retries may add at most
// `ratio` of the upstream's first-attempt load, plus a small floor so that a
// quiet upstream can still be retried. An outage then costs the upstream at
// most (1 + ratio) times its normal load instead of max_attempts times.
//
// Mechanics: each first attempt deposits `ratio` tokens; each retry withdraws
// one. Deposits fade exponentially with time constant `memory` (Finagle keeps
// them for a 10 s window), so credit earned during a long healthy spell cannot
// be spent as a retry storm later. When the deposits are spent, the floor — a
// rate limit of `minPerSecond`, bursting to one second's worth — still lets a
// few retries through. Withdrawal order: deposits first, floor second.
//
// Thread-safe and lock-free: the deposit balance and its last-update time
// share one 64-bit atomic word updated by CAS; the floor is a RateLimit.
#pragma once

#include <atomic>
#include <cstdint>

#include "relay/upstream/shaping.hpp"
#include "relay/upstream/time.hpp"

namespace relay::upstream {

struct RetryBudgetOptions {
  double ratio = 0.2;       // tokens per first attempt, in [0, 1]
  double minPerSecond = 5;  // floor: retries per second allowed whatever the traffic; 0 = none
  Millis memory{10'000};    // time constant of the deposits' fade; 0 = they never fade
};

// Where a granted retry's token came from, so an unused grant can be returned.
enum class RetryGrant { kRefused, kDeposit, kFloor };

class RetryBudget {
 public:
  // Deposits are counted in millionths of a token; the balance saturates at
  // about 4,294 tokens (32 bits), which bounds the largest burst of retries.
  static constexpr std::uint64_t kMicro = 1'000'000;

  explicit RetryBudget(const RetryBudgetOptions& options = {});
  RetryBudget(const RetryBudget&) = delete;
  RetryBudget& operator=(const RetryBudget&) = delete;

  void onFirstAttempt(SteadyTime now);
  // Withdraws one token for a retry to this upstream, or refuses.
  RetryGrant tryRetry(SteadyTime now);
  // Returns a grant whose retry was not sent after all (e.g. the upstream was
  // then found to be over its rate).
  void refund(RetryGrant grant, SteadyTime now);

  // Deposited tokens available at `now` (floor excluded).
  double balance(SteadyTime now) const;
  std::uint64_t retriesGranted() const { return granted_.load(std::memory_order_relaxed); }
  std::uint64_t retriesRefused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  // word = balance (millionths, high 32 bits) | last update (steady ms mod 2^32).
  static std::uint64_t pack(std::uint64_t micro, std::uint32_t stampMs);
  std::uint64_t decayed(std::uint64_t word, std::uint32_t nowMs, std::uint32_t& stampMs) const;
  void add(std::uint64_t micro, SteadyTime now);

  const std::uint64_t ratioMicro_;
  const double memoryMs_;
  const bool hasFloor_;
  RateLimit floor_;
  std::atomic<std::uint64_t> word_{0};
  std::atomic<std::uint64_t> granted_{0};
  std::atomic<std::uint64_t> refused_{0};
};

}  // namespace relay::upstream
