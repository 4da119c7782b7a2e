#include "relay/admission/key_limiter.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "relay/admission/go_duration.hpp"

namespace relay::admission {
namespace {

std::string_view perMinuteLabel(RefusalKind kind) {
  return kind == RefusalKind::kRequests ? "requests per min (RPM)" : "tokens per min (TPM)";
}

std::string waitText(std::chrono::nanoseconds wait) {
  GoDurationBuffer buf;
  return std::string(formatResetDuration(wait, buf));
}

}  // namespace

std::string_view Refusal::errorType() const {
  return kind == RefusalKind::kTokens || kind == RefusalKind::kTooLarge ? "tokens" : "requests";
}

void Refusal::appendHeaders(Headers& headers) const {
  if (kind == RefusalKind::kRequests || kind == RefusalKind::kTokens) {
    headers.set("retry-after", std::to_string(retryAfterSeconds(retryAfter)));
    headers.set("retry-after-ms", std::to_string(retryAfterMillis(retryAfter)));
  } else if (kind == RefusalKind::kConcurrency) {
    // When a slot frees is not known; without a hint SDKs retry at once and
    // meet the same full slots. A second is the shortest wait worth making.
    headers.set("retry-after", std::to_string(retryAfterSeconds(kConcurrencyRetryAfter)));
    headers.set("retry-after-ms", std::to_string(retryAfterMillis(kConcurrencyRetryAfter)));
  }
  headers.set("x-should-retry", retryable() ? "true" : "false");
}

Reservation::Reservation(Reservation&& other) noexcept
    : limiter_(std::exchange(other.limiter_, nullptr)),
      reserved_(other.reserved_),
      usedSoFar_(other.usedSoFar_),
      holdsSlot_(other.holdsSlot_) {}

Reservation& Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    if (limiter_) limiter_->finish(reserved_, usedSoFar_, limiter_->clock_.steadyNow(), holdsSlot_);
    limiter_ = std::exchange(other.limiter_, nullptr);
    reserved_ = other.reserved_;
    usedSoFar_ = other.usedSoFar_;
    holdsSlot_ = other.holdsSlot_;
  }
  return *this;
}

Reservation::~Reservation() {
  if (limiter_) limiter_->finish(reserved_, usedSoFar_, limiter_->clock_.steadyNow(), holdsSlot_);
}

void Reservation::settle(std::uint64_t actualTokens, SteadyTime now) {
  if (!limiter_) return;
  std::exchange(limiter_, nullptr)->finish(reserved_, actualTokens, now, holdsSlot_);
}

KeyLimiter::KeyLimiter(std::string keyName, const LimitOptions& options, const Clock& clock)
    : maxInFlight_(options.concurrency), name_(std::move(keyName)), clock_(clock) {
  if (options.rpm != 0) requests_.emplace(options.rpm, options.rpmBurst);
  if (options.tpm != 0) tokens_.emplace(options.tpm, options.tpmBurst);
}

Refusal bucketRefusal(std::string_view keyName, RefusalKind kind, std::uint64_t capacity,
                      std::int64_t remaining, std::uint64_t requested,
                      std::chrono::nanoseconds wait) {
  std::string message = "Rate limit reached for key '" + std::string(keyName) + "' on ";
  message += perMinuteLabel(kind);
  message += ": Limit " + std::to_string(capacity) + ", Remaining " +
             std::to_string(std::max<std::int64_t>(remaining, 0)) + ", Requested " +
             std::to_string(requested) + ". Please try again in " + waitText(wait) + ".";
  return Refusal{kind, wait, std::move(message)};
}

Refusal tooLargeRefusal(std::string_view keyName, std::uint64_t capacity, std::uint64_t requested) {
  return Refusal{RefusalKind::kTooLarge, std::chrono::nanoseconds(0),
                 "Request too large for key '" + std::string(keyName) +
                     "' on tokens per min (TPM): Limit " + std::to_string(capacity) +
                     ", Requested " + std::to_string(requested) +
                     " (estimated prompt tokens plus max_tokens). Lower max_tokens or shorten the "
                     "messages; waiting will not help."};
}

Refusal concurrencyRefusal(std::string_view keyName, std::uint32_t limit) {
  return Refusal{RefusalKind::kConcurrency, std::chrono::nanoseconds(0),
                 "Too many concurrent requests for key '" + std::string(keyName) + "': Limit " +
                     std::to_string(limit) + " in flight. Retry when one of them has finished."};
}

Refusal KeyLimiter::refuse(RefusalKind kind, const TokenBucket& bucket, std::uint64_t requested,
                           std::chrono::nanoseconds wait, SteadyTime now) const {
  return bucketRefusal(name_, kind, bucket.capacity(), bucket.remaining(now), requested, wait);
}

AdmitResult KeyLimiter::admit(std::uint64_t estimatedTokens, SteadyTime now, bool holdSlot) {
  if (tokens_ && estimatedTokens > tokens_->capacity()) {
    return AdmitResult(tooLargeRefusal(name_, tokens_->capacity(), estimatedTokens));
  }

  // Look before taking anything: a refusal then leaves no trace, and its wait
  // covers both buckets, so a caller who waits it out is not refused again by
  // the other one. The kind reported is the bucket with the longer wait.
  const TakeResult requestsNow = requests_ ? requests_->peek(1, now) : TakeResult{};
  const TakeResult tokensNow = tokens_ ? tokens_->peek(estimatedTokens, now) : TakeResult{};
  if (!requestsNow.taken() || !tokensNow.taken()) {
    const std::chrono::nanoseconds wait = std::max(requestsNow.wait, tokensNow.wait);
    if (requestsNow.wait >= tokensNow.wait) {
      return AdmitResult(refuse(RefusalKind::kRequests, *requests_, 1, wait, now));
    }
    return AdmitResult(refuse(RefusalKind::kTokens, *tokens_, estimatedTokens, wait, now));
  }

  const bool slot = holdSlot && maxInFlight_ != 0;
  if (slot) {
    // A compare-exchange rather than increment-then-undo: a transient overshoot
    // could make a concurrent admit see "full" while a slot is actually free.
    std::uint32_t current = inFlight_.load(std::memory_order_relaxed);
    do {
      if (current >= maxInFlight_) {
        return AdmitResult(concurrencyRefusal(name_, maxInFlight_));
      }
    } while (!inFlight_.compare_exchange_weak(current, current + 1, std::memory_order_acquire,
                                              std::memory_order_relaxed));
  }

  // Another worker may have emptied a bucket since the look: then undo what
  // this request took and refuse with the wait seen by the losing take.
  if (requests_) {
    const TakeResult r = requests_->tryTake(1, now);
    if (!r.taken()) {
      if (slot) releaseSlot();
      return AdmitResult(refuse(RefusalKind::kRequests, *requests_, 1, r.wait, now));
    }
  }
  if (tokens_) {
    const TakeResult t = tokens_->tryTake(estimatedTokens, now);
    if (!t.taken()) {
      if (requests_) requests_->refund(1, now);
      if (slot) releaseSlot();
      return AdmitResult(
          refuse(RefusalKind::kTokens, *tokens_, estimatedTokens, t.wait, now));
    }
  }
  return AdmitResult(Reservation(this, estimatedTokens, slot));
}

void KeyLimiter::releaseSlot() {
  if (maxInFlight_ != 0) inFlight_.fetch_sub(1, std::memory_order_release);
}

void KeyLimiter::finish(std::uint64_t reserved, std::uint64_t actual, SteadyTime now,
                        bool holdsSlot) {
  if (tokens_) {
    if (actual < reserved) {
      tokens_->refund(reserved - actual, now);
    } else if (actual > reserved) {
      tokens_->charge(actual - reserved, now);
    }
  }
  if (holdsSlot) releaseSlot();
}

RateLimitHeaders KeyLimiter::headers(SteadyTime now) const {
  RateLimitHeaders out;
  auto addDimension = [&](const TokenBucket& bucket, std::string_view limit,
                          std::string_view remaining, std::string_view reset) {
    out.addNumber(limit, bucket.capacity());
    out.addNumber(remaining,
                  static_cast<std::uint64_t>(std::max<std::int64_t>(bucket.remaining(now), 0)));
    out.addResetDuration(reset, bucket.timeUntilFull(now));
  };
  if (requests_) {
    addDimension(*requests_, "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests",
                 "x-ratelimit-reset-requests");
  }
  if (tokens_) {
    addDimension(*tokens_, "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens",
                 "x-ratelimit-reset-tokens");
  }
  return out;
}

}  // namespace relay::admission
