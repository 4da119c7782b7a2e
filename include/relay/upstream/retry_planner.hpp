// What to do after an attempt failed: wait and retry, retry elsewhere at once,
// or give up. Pure: the caller passes the failure, how many attempts were made,
// the clock reading, the request's deadline and random bits for the jitter.
//
// Invariant the caller keeps: a plan is asked for only while nothing has been
// sent to the caller. Once a response head went out, the request is not
// retried, whatever this says.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "relay/upstream/backoff.hpp"
#include "relay/upstream/time.hpp"

namespace relay::upstream {

// How an attempt failed, named as in `retry.retry_on` and `failureClass()`.
enum class FailureClass {
  kConnectError,   // DNS, TCP or TLS failure: the request never reached the upstream
  kTimeout,        // connect, first-byte or idle deadline
  kReset,          // connection closed or reset before a usable response
  kProtocolError,  // not valid HTTP from the upstream
  kHttpStatus,     // a complete response head with an error status
};

// "connect_error", "timeout", "reset", "protocol_error" -> the class.
std::optional<FailureClass> failureClassFromName(std::string_view name);
// The other way: "connect_error", ..., and "http_status" for kHttpStatus.
std::string_view failureClassName(FailureClass kind);

struct AttemptFailure {
  FailureClass kind = FailureClass::kConnectError;
  int status = 0;                    // kHttpStatus only
  std::optional<Millis> retryAfter;  // the upstream's Retry-After / retry-after-ms
  // False when the upstream's answer says retrying cannot help (exhausted
  // quota, bad credentials, `x-should-retry: false`), whatever the status.
  bool retryable = true;
};

// How a finished attempt reflects on the upstream's health.
enum class HealthVerdict {
  kSuccess,  // it answered: 2xx-4xx except 429 (a 400 is the caller's fault, not the upstream's)
  kFailure,  // connect error, timeout, reset, protocol error, 5xx
  kNeutral,  // 429: alive but busy; shaping and Retry-After deal with it, not ejection
};
HealthVerdict healthVerdict(const AttemptFailure& failure);
HealthVerdict healthVerdictForStatus(int status);

// The `retry.retry_on` list, compiled. `reset` is retryable when it or
// connect_error is listed (the config accepts only the latter today): the client already replaced a
// stale pooled connection once, so a reset that still reaches us means the upstream dropped the
// request before it answered — the same situation as a refused connection, as far as the caller can
// tell. `protocol_error` is retryable when it or 502 is listed, 502 being the status a gateway
// gives for an invalid upstream response.
class RetryOn {
 public:
  RetryOn() = default;
  // Entries as the config validates them: "connect_error", "timeout" or a
  // three-digit status. Returns the first entry it does not understand.
  static RetryOn parse(std::span<const std::string> entries, std::string* unknown = nullptr);

  bool connectError() const { return connectError_; }
  bool timeout() const { return timeout_; }
  bool status(int code) const { return code >= 100 && code < 600 && statuses_.test(code); }
  bool matches(const AttemptFailure& failure) const;

  RetryOn& add(FailureClass kind);  // not kHttpStatus
  RetryOn& addStatus(int code);

 private:
  bool connectError_ = false;
  bool reset_ = false;
  bool timeout_ = false;
  bool protocolError_ = false;
  std::bitset<600> statuses_;
};

struct RetryOptions {
  unsigned maxAttempts = 3;  // total tries per request, across upstreams and fallback models
  BackoffOptions backoff;
  RetryOn retryOn;
  // A retry needs at least this much of the deadline left to be worth sending:
  // an attempt that cannot finish only adds load to an upstream.
  Millis minAttemptTime{100};
};

enum class RetryAction {
  kRetryAfter,      // wait `delay`, then retry on any upstream (preferring untried ones)
  kRetryElsewhere,  // retry now on another upstream; the one that failed must not be used
  kGiveUp,
};

enum class GiveUpReason { kNone, kNotRetryable, kAttemptsExhausted, kDeadline };

struct RetryDecision {
  RetryAction action = RetryAction::kGiveUp;
  Millis delay{0};
  GiveUpReason reason = GiveUpReason::kNone;
  bool honoursRetryAfter = false;  // `delay` is the upstream's own Retry-After

  bool retry() const { return action != RetryAction::kGiveUp; }
};

class RetryPlanner {
 public:
  explicit RetryPlanner(const RetryOptions& options) : options_(options) {}

  // `attemptsMade` counts every attempt of this request so far, the failed one
  // included. `deadline` is when the request's total time runs out.
  RetryDecision plan(const AttemptFailure& failure, unsigned attemptsMade, SteadyTime now,
                     SteadyTime deadline, std::uint64_t randomBits) const;

  const RetryOptions& options() const { return options_; }

 private:
  RetryOptions options_;
};

}  // namespace relay::upstream
