// The rate limits of one key: requests per minute, tokens per minute and
// requests in flight, decided together at admission and reconciled at the end.
//
// Admission reserves: the request takes one request token, its estimated
// tokens (prompt estimate + completion cap, see token_estimate.hpp) and a
// concurrency slot, all held by a `Reservation` until the exchange ends. Settle
// then refunds what was reserved but not used, or charges the excess (the
// bucket may go into debt, which delays the key's next requests). A burst of
// long requests therefore cannot slip past the limit before usage is known.
//
// Thread-safety: every member may be called from any worker at once. The state
// is three atomics (two bucket words and the in-flight count), all in this
// object's cache line(s), so different keys never contend with each other.
//
// Lifetime: the limiter must outlive its reservations (keep the limiter set of
// a config snapshot alive while exchanges admitted under it are running).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "relay/admission/clock.hpp"
#include "relay/admission/rate_limit_headers.hpp"
#include "relay/admission/token_bucket.hpp"

namespace relay::admission {

// One key's limits, mapped from the config by the caller. 0 = unlimited;
// a burst of 0 equals the per-minute rate.
struct LimitOptions {
  std::uint32_t rpm = 0;
  std::uint32_t rpmBurst = 0;
  std::uint64_t tpm = 0;
  std::uint64_t tpmBurst = 0;
  std::uint32_t concurrency = 0;
};

enum class RefusalKind {
  kRequests,     // request bucket empty: retryAfter is exact
  kTokens,       // token bucket short of this request's reservation: retryAfter is exact
  kConcurrency,  // all slots busy: no known time; the headers say kConcurrencyRetryAfter
  kTooLarge,     // reservation above the token bucket's capacity: waiting never helps
};

// The Retry-After of a concurrency refusal (when a slot frees is unknown).
inline constexpr std::chrono::seconds kConcurrencyRetryAfter{1};

struct Refusal {
  RefusalKind kind = RefusalKind::kRequests;
  // The exact time until the buckets could admit this same request (the
  // longer of the two when both are short). 0 for concurrency and too large.
  std::chrono::nanoseconds retryAfter{0};
  std::string message;  // OpenAI-style, names the key, the limit and the wait

  // OpenAI's error "type" for the 429 body: "requests" or "tokens".
  std::string_view errorType() const;
  // False only for kTooLarge: send `x-should-retry: false` and no Retry-After.
  bool retryable() const { return kind != RefusalKind::kTooLarge; }
  // Adds retry-after / retry-after-ms (when the wait is known) and x-should-retry.
  void appendHeaders(Headers& headers) const;
};

// The refusals, worded the same wherever the decision was made (this
// process's limiter or the shared one in Redis).
Refusal bucketRefusal(std::string_view keyName, RefusalKind kind, std::uint64_t capacity,
                      std::int64_t remaining, std::uint64_t requested,
                      std::chrono::nanoseconds wait);
Refusal tooLargeRefusal(std::string_view keyName, std::uint64_t capacity, std::uint64_t requested);
Refusal concurrencyRefusal(std::string_view keyName, std::uint32_t limit);

class KeyLimiter;

// Holds a concurrency slot and the reserved tokens of one admitted request.
// Settle it once with the real usage; dropping it unsettled (a cancelled or
// failed exchange) settles with the last `setUsedSoFar` value, which starts
// as the whole reservation, so a forgotten settle never under-charges.
class Reservation {
 public:
  Reservation() = default;
  Reservation(Reservation&& other) noexcept;
  Reservation& operator=(Reservation&& other) noexcept;
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  ~Reservation();

  bool active() const { return limiter_ != nullptr; }
  std::uint64_t reservedTokens() const { return reserved_; }

  // What a drop without settle charges (e.g. prompt + completion streamed so far).
  void setUsedSoFar(std::uint64_t tokens) { usedSoFar_ = tokens; }

  // Refunds reserved - actual, or charges actual - reserved, and frees the
  // slot. Later calls (and the destructor) do nothing.
  void settle(std::uint64_t actualTokens, SteadyTime now);

 private:
  friend class KeyLimiter;
  Reservation(KeyLimiter* limiter, std::uint64_t reserved, bool holdsSlot)
      : limiter_(limiter), reserved_(reserved), usedSoFar_(reserved), holdsSlot_(holdsSlot) {}

  KeyLimiter* limiter_ = nullptr;
  std::uint64_t reserved_ = 0;
  std::uint64_t usedSoFar_ = 0;
  bool holdsSlot_ = true;
};

class AdmitResult {
 public:
  explicit AdmitResult(Reservation r) : value_(std::move(r)) {}
  explicit AdmitResult(Refusal r) : value_(std::move(r)) {}

  bool admitted() const { return std::holds_alternative<Reservation>(value_); }
  explicit operator bool() const { return admitted(); }
  Reservation& reservation() { return std::get<Reservation>(value_); }
  const Refusal& refusal() const { return std::get<Refusal>(value_); }

 private:
  std::variant<Reservation, Refusal> value_;
};

class alignas(64) KeyLimiter {
 public:
  // `clock` is read only when a reservation is dropped without settle.
  KeyLimiter(std::string keyName, const LimitOptions& options,
             const Clock& clock = SystemClock::instance());
  KeyLimiter(const KeyLimiter&) = delete;
  KeyLimiter& operator=(const KeyLimiter&) = delete;

  // Admits a request that reserves `estimatedTokens` (see reservationFor), or
  // says why not. Checks in this order: too large for the token bucket, the
  // buckets (refusing without side effects, with the true wait), then a
  // concurrency slot (unless `holdSlot` is false: a long-lived stream that
  // counts against rpm but must not take a call's place), then takes from
  // both buckets.
  AdmitResult admit(std::uint64_t estimatedTokens, SteadyTime now, bool holdSlot = true);

  // The x-ratelimit-* headers for this key at `now`.
  RateLimitHeaders headers(SteadyTime now) const;

  // Requests holding a slot; counted only when concurrency is limited.
  std::uint32_t inFlight() const { return inFlight_.load(std::memory_order_relaxed); }
  const std::string& keyName() const { return name_; }
  const TokenBucket* requestBucket() const { return requests_ ? &*requests_ : nullptr; }
  const TokenBucket* tokenBucket() const { return tokens_ ? &*tokens_ : nullptr; }

 private:
  friend class Reservation;
  void finish(std::uint64_t reserved, std::uint64_t actual, SteadyTime now, bool holdsSlot);
  void releaseSlot();
  Refusal refuse(RefusalKind kind, const TokenBucket& bucket, std::uint64_t requested,
                 std::chrono::nanoseconds wait, SteadyTime now) const;

  std::optional<TokenBucket> requests_;
  std::optional<TokenBucket> tokens_;
  std::atomic<std::uint32_t> inFlight_{0};
  std::uint32_t maxInFlight_ = 0;
  std::string name_;
  const Clock& clock_;
};

}  // namespace relay::admission
