#include "relay/upstream/retry_planner.hpp"

#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace relay::upstream {
namespace {

constexpr std::uint64_t kAllOnes = std::numeric_limits<std::uint64_t>::max();
const SteadyTime kNow = SteadyTime(std::chrono::hours(1));

RetryOptions defaults() {
  RetryOptions o;
  o.maxAttempts = 3;
  o.backoff = {Millis(100), Millis(8'000)};
  const std::vector<std::string> on = {"connect_error", "timeout", "429", "500",
                                       "502",           "503",     "504"};
  o.retryOn = RetryOn::parse(on);
  o.minAttemptTime = Millis(100);
  return o;
}

AttemptFailure status(int code, std::optional<Millis> retryAfter = std::nullopt) {
  return AttemptFailure{FailureClass::kHttpStatus, code, retryAfter, true};
}

AttemptFailure failure(FailureClass kind) {
  return AttemptFailure{kind, 0, std::nullopt, true};
}

TEST(RetryPlanner, RetryAfterThatFitsTheDeadlineIsWaitedFor) {
  const RetryPlanner p(defaults());
  const RetryDecision d = p.plan(status(429, Millis(1'000)), 1, kNow, kNow + Millis(10'000), 0);
  EXPECT_EQ(d.action, RetryAction::kRetryAfter);
  EXPECT_EQ(d.delay, Millis(1'000));
  EXPECT_TRUE(d.honoursRetryAfter);
  EXPECT_TRUE(d.retry());
}

TEST(RetryPlanner, RetryAfterBeyondTheDeadlineSendsTheRetryElsewhereNow) {
  const RetryPlanner p(defaults());
  const RetryDecision d = p.plan(status(429, Millis(30'000)), 1, kNow, kNow + Millis(10'000), 0);
  EXPECT_EQ(d.action, RetryAction::kRetryElsewhere);
  EXPECT_EQ(d.delay, Millis(0));
  EXPECT_FALSE(d.honoursRetryAfter);
}

TEST(RetryPlanner, RetryAfterMustLeaveTheMinimumAttemptTime) {
  const RetryPlanner p(defaults());
  const SteadyTime deadline = kNow + Millis(2'000);
  // 1,900 ms wait + 100 ms for the attempt fits exactly; one more does not.
  EXPECT_EQ(p.plan(status(503, Millis(1'900)), 1, kNow, deadline, 0).action,
            RetryAction::kRetryAfter);
  EXPECT_EQ(p.plan(status(503, Millis(1'901)), 1, kNow, deadline, 0).action,
            RetryAction::kRetryElsewhere);
}

TEST(RetryPlanner, NonRetryableFailuresGiveUp) {
  const RetryPlanner p(defaults());
  const SteadyTime deadline = kNow + Millis(60'000);
  for (int code : {400, 401, 403, 404, 422, 501}) {
    const RetryDecision d = p.plan(status(code), 1, kNow, deadline, 0);
    EXPECT_EQ(d.action, RetryAction::kGiveUp) << code;
    EXPECT_EQ(d.reason, GiveUpReason::kNotRetryable) << code;
  }
  // A listed status the upstream marked hopeless (exhausted quota) gives up too.
  AttemptFailure quota = status(429, Millis(1'000));
  quota.retryable = false;
  EXPECT_EQ(p.plan(quota, 1, kNow, deadline, 0).reason, GiveUpReason::kNotRetryable);
}

TEST(RetryPlanner, AttemptsAreExhaustedAtMaxAttempts) {
  const RetryPlanner p(defaults());
  const SteadyTime deadline = kNow + Millis(60'000);
  EXPECT_TRUE(p.plan(status(503), 2, kNow, deadline, 0).retry());
  const RetryDecision d = p.plan(status(503), 3, kNow, deadline, 0);
  EXPECT_EQ(d.action, RetryAction::kGiveUp);
  EXPECT_EQ(d.reason, GiveUpReason::kAttemptsExhausted);
}

TEST(RetryPlanner, GivesUpWhenTheDeadlineLeavesNoTimeForAnAttempt) {
  const RetryPlanner p(defaults());
  EXPECT_EQ(p.plan(status(503), 1, kNow, kNow + Millis(99), 0).reason, GiveUpReason::kDeadline);
  EXPECT_EQ(p.plan(status(503), 1, kNow, kNow - Millis(1), 0).reason, GiveUpReason::kDeadline);
  EXPECT_EQ(p.plan(failure(FailureClass::kTimeout), 1, kNow, kNow, 0).reason,
            GiveUpReason::kDeadline);
  // Exactly the minimum left: an immediate retry is still worth it.
  const RetryDecision d = p.plan(status(503), 1, kNow, kNow + Millis(100), kAllOnes);
  EXPECT_EQ(d.action, RetryAction::kRetryAfter);
  EXPECT_EQ(d.delay, Millis(0));
}

TEST(RetryPlanner, WithoutRetryAfterTheWaitIsJitteredBackoff) {
  const RetryPlanner p(defaults());
  const SteadyTime deadline = kNow + Millis(600'000);
  // The largest draw equals the ceiling: base * 2^(attempts - 1).
  EXPECT_EQ(p.plan(status(502), 1, kNow, deadline, kAllOnes).delay, Millis(100));
  EXPECT_EQ(p.plan(status(502), 2, kNow, deadline, kAllOnes).delay, Millis(200));
  EXPECT_EQ(p.plan(status(502), 2, kNow, deadline, 0).delay, Millis(0));
  const RetryDecision d = p.plan(failure(FailureClass::kConnectError), 1, kNow, deadline, 0);
  EXPECT_EQ(d.action, RetryAction::kRetryAfter);
  EXPECT_FALSE(d.honoursRetryAfter);
}

TEST(RetryPlanner, BackoffIsCappedByMaxAndByTheDeadline) {
  RetryOptions o = defaults();
  o.maxAttempts = 20;
  const RetryPlanner p(o);
  EXPECT_EQ(p.plan(status(500), 15, kNow, kNow + Millis(600'000), kAllOnes).delay, Millis(8'000));
  // 250 ms left, 100 ms of it reserved for the attempt: the wait is at most 150.
  EXPECT_EQ(p.plan(status(500), 3, kNow, kNow + Millis(250), kAllOnes).delay, Millis(150));
}

TEST(RetryPlanner, ResetIsRetryableWhenConnectErrorIsListed) {
  const RetryPlanner p(defaults());
  const SteadyTime deadline = kNow + Millis(60'000);
  EXPECT_TRUE(p.plan(failure(FailureClass::kReset), 1, kNow, deadline, 0).retry());

  RetryOptions o = defaults();
  const std::vector<std::string> noConnect = {"timeout", "503"};
  o.retryOn = RetryOn::parse(noConnect);
  const RetryPlanner strict(o);
  EXPECT_EQ(strict.plan(failure(FailureClass::kReset), 1, kNow, deadline, 0).reason,
            GiveUpReason::kNotRetryable);
  EXPECT_EQ(strict.plan(failure(FailureClass::kConnectError), 1, kNow, deadline, 0).reason,
            GiveUpReason::kNotRetryable);
  EXPECT_TRUE(strict.plan(failure(FailureClass::kTimeout), 1, kNow, deadline, 0).retry());
  // A protocol error is what a gateway reports as 502; 502 is not listed here.
  EXPECT_FALSE(strict.plan(failure(FailureClass::kProtocolError), 1, kNow, deadline, 0).retry());
  EXPECT_TRUE(p.plan(failure(FailureClass::kProtocolError), 1, kNow, deadline, 0).retry());
}

TEST(RetryOn, ParsesTheConfigEntries) {
  const std::vector<std::string> entries = {"timeout", "429", "599", "bogus", "60"};
  std::string unknown;
  const RetryOn r = RetryOn::parse(entries, &unknown);
  EXPECT_TRUE(r.timeout());
  EXPECT_FALSE(r.connectError());
  EXPECT_TRUE(r.status(429));
  EXPECT_TRUE(r.status(599));
  EXPECT_FALSE(r.status(503));
  EXPECT_FALSE(r.status(600));
  EXPECT_EQ(unknown, "bogus");
}

TEST(FailureClass, NamesMatchTheClientsFailureClasses) {
  EXPECT_EQ(failureClassFromName("connect_error"), FailureClass::kConnectError);
  EXPECT_EQ(failureClassFromName("timeout"), FailureClass::kTimeout);
  EXPECT_EQ(failureClassFromName("reset"), FailureClass::kReset);
  EXPECT_EQ(failureClassFromName("protocol_error"), FailureClass::kProtocolError);
  EXPECT_EQ(failureClassFromName("none"), std::nullopt);
}

TEST(HealthVerdict, ServerFailuresCountClientErrorsDoNotAndThrottlingIsNeutral) {
  for (FailureClass k : {FailureClass::kConnectError, FailureClass::kTimeout, FailureClass::kReset,
                         FailureClass::kProtocolError}) {
    EXPECT_EQ(healthVerdict(failure(k)), HealthVerdict::kFailure);
  }
  for (int code : {500, 502, 503, 504, 599}) {
    EXPECT_EQ(healthVerdict(status(code)), HealthVerdict::kFailure) << code;
  }
  for (int code : {200, 400, 401, 403, 404, 408, 422}) {
    EXPECT_EQ(healthVerdict(status(code)), HealthVerdict::kSuccess) << code;
  }
  EXPECT_EQ(healthVerdict(status(429)), HealthVerdict::kNeutral);
}

}  // namespace
}  // namespace relay::upstream
