#include "relay/upstream/retry_planner.hpp"

#include <algorithm>
#include <charconv>

namespace relay::upstream {

std::optional<FailureClass> failureClassFromName(std::string_view name) {
  if (name == "connect_error") return FailureClass::kConnectError;
  if (name == "timeout") return FailureClass::kTimeout;
  if (name == "reset") return FailureClass::kReset;
  if (name == "protocol_error") return FailureClass::kProtocolError;
  return std::nullopt;
}

std::string_view failureClassName(FailureClass kind) {
  switch (kind) {
    case FailureClass::kConnectError:
      return "connect_error";
    case FailureClass::kTimeout:
      return "timeout";
    case FailureClass::kReset:
      return "reset";
    case FailureClass::kProtocolError:
      return "protocol_error";
    case FailureClass::kHttpStatus:
      break;
  }
  return "http_status";
}

HealthVerdict healthVerdictForStatus(int status) {
  if (status >= 500) return HealthVerdict::kFailure;
  if (status == 429) return HealthVerdict::kNeutral;
  return HealthVerdict::kSuccess;
}

HealthVerdict healthVerdict(const AttemptFailure& failure) {
  if (failure.kind == FailureClass::kHttpStatus) return healthVerdictForStatus(failure.status);
  return HealthVerdict::kFailure;
}

RetryOn RetryOn::parse(std::span<const std::string> entries, std::string* unknown) {
  RetryOn r;
  for (const std::string& e : entries) {
    if (auto kind = failureClassFromName(e)) {
      r.add(*kind);
      continue;
    }
    int code = 0;
    auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), code);
    if (ec == std::errc() && end == e.data() + e.size() && e.size() == 3 && code >= 100 &&
        code < 600) {
      r.addStatus(code);
    } else if (unknown && unknown->empty()) {
      *unknown = e;
    }
  }
  return r;
}

RetryOn& RetryOn::add(FailureClass kind) {
  switch (kind) {
    case FailureClass::kConnectError:
      connectError_ = true;
      break;
    case FailureClass::kReset:
      reset_ = true;
      break;
    case FailureClass::kTimeout:
      timeout_ = true;
      break;
    case FailureClass::kProtocolError:
      protocolError_ = true;
      break;
    case FailureClass::kHttpStatus:
      break;
  }
  return *this;
}

RetryOn& RetryOn::addStatus(int code) {
  if (code >= 100 && code < 600) statuses_.set(static_cast<std::size_t>(code));
  return *this;
}

bool RetryOn::matches(const AttemptFailure& failure) const {
  switch (failure.kind) {
    case FailureClass::kConnectError:
      return connectError_;
    case FailureClass::kReset:
      return reset_ || connectError_;
    case FailureClass::kTimeout:
      return timeout_;
    case FailureClass::kProtocolError:
      return protocolError_ || status(502);
    case FailureClass::kHttpStatus:
      return status(failure.status);
  }
  return false;
}

RetryDecision RetryPlanner::plan(const AttemptFailure& failure, unsigned attemptsMade,
                                 SteadyTime now, SteadyTime deadline,
                                 std::uint64_t randomBits) const {
  RetryDecision d;
  if (!failure.retryable || !options_.retryOn.matches(failure)) {
    d.reason = GiveUpReason::kNotRetryable;
    return d;
  }
  if (attemptsMade >= options_.maxAttempts) {
    d.reason = GiveUpReason::kAttemptsExhausted;
    return d;
  }
  const Millis remaining = std::chrono::floor<Millis>(deadline - now);
  // The time a retry may spend waiting and still leave an attempt its minimum.
  const Millis slack = remaining - options_.minAttemptTime;
  if (slack < Millis(0)) {
    d.reason = GiveUpReason::kDeadline;
    return d;
  }
  if (failure.retryAfter) {
    if (*failure.retryAfter <= slack) {
      d.action = RetryAction::kRetryAfter;
      d.delay = *failure.retryAfter;
      d.honoursRetryAfter = true;
    } else {
      // Waiting as asked would overrun the deadline; another upstream may
      // answer now. The one that asked must not be retried early.
      d.action = RetryAction::kRetryElsewhere;
    }
    return d;
  }
  // Full jitter under the smaller of the backoff ceiling and the slack: still
  // uniform, just over a range that ends before the deadline.
  const unsigned retry = attemptsMade == 0 ? 0 : attemptsMade - 1;
  const Millis ceiling = std::min(backoffCeiling(options_.backoff, retry), slack);
  d.action = RetryAction::kRetryAfter;
  d.delay = fullJitter(ceiling, randomBits);
  return d;
}

}  // namespace relay::upstream
