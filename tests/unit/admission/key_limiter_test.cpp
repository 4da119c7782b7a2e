// One key's limits together: reservation at admission, settlement, the
// concurrency slot, refusals with their exact waits, and the headers.
#include "relay/admission/key_limiter.hpp"

#include <chrono>
#include <string>

#include <gtest/gtest.h>

namespace relay::admission {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

std::string header(const RateLimitHeaders& h, std::string_view name) {
  for (const RateLimitHeader& f : h.fields()) {
    if (f.name == name) return std::string(f.value());
  }
  return "<absent>";
}

class KeyLimiterTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  SteadyTime now() const { return clock_.steadyNow(); }
};

TEST_F(KeyLimiterTest, ReservesEstimateAndRefundsTheUnusedPart) {
  KeyLimiter limiter("planner", LimitOptions{.tpm = 10'000}, clock_);
  AdmitResult r = limiter.admit(4'000, now());
  ASSERT_TRUE(r.admitted());
  EXPECT_EQ(r.reservation().reservedTokens(), 4'000u);
  EXPECT_EQ(limiter.tokenBucket()->remaining(now()), 6'000);
  r.reservation().settle(1'500, now());
  EXPECT_EQ(limiter.tokenBucket()->remaining(now()), 8'500);
  EXPECT_FALSE(r.reservation().active());
  r.reservation().settle(0, now());  // a second settle changes nothing
  EXPECT_EQ(limiter.tokenBucket()->remaining(now()), 8'500);
}

TEST_F(KeyLimiterTest, UsageAboveTheReservationIsChargedAsDebt) {
  KeyLimiter limiter("planner", LimitOptions{.tpm = 6'000}, clock_);  // 10 ms per token
  AdmitResult r = limiter.admit(5'000, now());
  ASSERT_TRUE(r);
  r.reservation().settle(7'000, now());
  EXPECT_EQ(limiter.tokenBucket()->remaining(now()), -1'000);
  // The next small request waits for the debt plus its own 10 tokens.
  AdmitResult next = limiter.admit(10, now());
  ASSERT_FALSE(next);
  EXPECT_EQ(next.refusal().kind, RefusalKind::kTokens);
  EXPECT_EQ(next.refusal().retryAfter, seconds(10) + milliseconds(100));
}

TEST_F(KeyLimiterTest, RequestsRefusalCarriesTheExactWait) {
  KeyLimiter limiter("planner", LimitOptions{.rpm = 60, .rpmBurst = 3}, clock_);
  for (int i = 0; i < 3; ++i) {
    AdmitResult r = limiter.admit(100, now());
    ASSERT_TRUE(r) << i;
    r.reservation().settle(100, now());
  }
  clock_.advance(milliseconds(250));
  AdmitResult refused = limiter.admit(100, now());
  ASSERT_FALSE(refused);
  const Refusal& why = refused.refusal();
  EXPECT_EQ(why.kind, RefusalKind::kRequests);
  EXPECT_EQ(why.errorType(), "requests");
  EXPECT_EQ(why.retryAfter, milliseconds(750));
  EXPECT_EQ(why.message,
            "Rate limit reached for key 'planner' on requests per min (RPM): Limit 3, "
            "Remaining 0, Requested 1. Please try again in 750ms.");
  Headers h;
  why.appendHeaders(h);
  EXPECT_EQ(h.get("retry-after"), "1");
  EXPECT_EQ(h.get("retry-after-ms"), "750");
  EXPECT_EQ(h.get("x-should-retry"), "true");
  // Waiting exactly that long is enough.
  clock_.advance(why.retryAfter - nanoseconds(1));
  EXPECT_FALSE(limiter.admit(100, now()));
  clock_.advance(nanoseconds(1));
  EXPECT_TRUE(limiter.admit(100, now()));
}

TEST_F(KeyLimiterTest, TokensRefusalCarriesTheExactWaitAndTakesNothing) {
  KeyLimiter limiter("planner", LimitOptions{.rpm = 600, .tpm = 60'000}, clock_);  // 1 ms/token
  AdmitResult big = limiter.admit(59'000, now());
  ASSERT_TRUE(big);
  AdmitResult refused = limiter.admit(3'500, now());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.refusal().kind, RefusalKind::kTokens);
  EXPECT_EQ(refused.refusal().errorType(), "tokens");
  EXPECT_EQ(refused.refusal().retryAfter, milliseconds(2'500));
  Headers h;
  refused.refusal().appendHeaders(h);
  EXPECT_EQ(h.get("retry-after"), "3");
  EXPECT_EQ(h.get("retry-after-ms"), "2500");
  // The refusal took no request token and no slot.
  EXPECT_EQ(limiter.requestBucket()->remaining(now()), 599);
  EXPECT_EQ(limiter.tokenBucket()->remaining(now()), 1'000);
}

TEST_F(KeyLimiterTest, WhenBothBucketsAreShortTheLongerWaitIsReported) {
  KeyLimiter limiter("k", LimitOptions{.rpm = 60, .rpmBurst = 1, .tpm = 600}, clock_);
  ASSERT_TRUE(limiter.admit(600, now()));  // both empty now
  AdmitResult small = limiter.admit(1, now());
  ASSERT_FALSE(small);
  EXPECT_EQ(small.refusal().kind, RefusalKind::kRequests);  // 1 s vs 100 ms for tokens
  EXPECT_EQ(small.refusal().retryAfter, seconds(1));
  AdmitResult large = limiter.admit(300, now());
  ASSERT_FALSE(large);
  EXPECT_EQ(large.refusal().kind, RefusalKind::kTokens);  // 30 s vs 1 s for requests
  EXPECT_EQ(large.refusal().retryAfter, seconds(30));
}

TEST_F(KeyLimiterTest, ARequestLargerThanTheBucketIsTooLargeNotDelayed) {
  KeyLimiter limiter("planner", LimitOptions{.tpm = 1'000}, clock_);
  AdmitResult r = limiter.admit(1'001, now());
  ASSERT_FALSE(r);
  const Refusal& why = r.refusal();
  EXPECT_EQ(why.kind, RefusalKind::kTooLarge);
  EXPECT_FALSE(why.retryable());
  EXPECT_EQ(why.errorType(), "tokens");
  EXPECT_NE(why.message.find("Limit 1000, Requested 1001"), std::string::npos) << why.message;
  EXPECT_NE(why.message.find("waiting will not help"), std::string::npos);
  Headers h;
  why.appendHeaders(h);
  EXPECT_FALSE(h.contains("retry-after"));
  EXPECT_FALSE(h.contains("retry-after-ms"));
  EXPECT_EQ(h.get("x-should-retry"), "false");
  EXPECT_EQ(limiter.tokenBucket()->remaining(now()), 1'000);
  EXPECT_TRUE(limiter.admit(1'000, now()));
}

TEST_F(KeyLimiterTest, ConcurrencySlotsAreHeldUntilSettleOrDrop) {
  KeyLimiter limiter("planner", LimitOptions{.concurrency = 2}, clock_);
  AdmitResult a = limiter.admit(10, now());
  std::optional<AdmitResult> b(limiter.admit(10, now()));
  ASSERT_TRUE(a && *b);
  EXPECT_EQ(limiter.inFlight(), 2u);
  AdmitResult c = limiter.admit(10, now());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.refusal().kind, RefusalKind::kConcurrency);
  EXPECT_EQ(c.refusal().retryAfter, nanoseconds(0));
  EXPECT_TRUE(c.refusal().retryable());
  Headers h;
  c.refusal().appendHeaders(h);
  // When a slot frees is unknown: a second's hint, so SDKs do not retry at once.
  EXPECT_EQ(h.get("retry-after"), "1");
  EXPECT_EQ(h.get("retry-after-ms"), "1000");
  EXPECT_EQ(h.get("x-should-retry"), "true");

  a.reservation().settle(10, now());
  EXPECT_EQ(limiter.inFlight(), 1u);
  EXPECT_TRUE(limiter.admit(10, now()));  // admitted and dropped at once
  EXPECT_EQ(limiter.inFlight(), 1u);
  b.reset();  // a cancelled exchange drops its reservation
  EXPECT_EQ(limiter.inFlight(), 0u);
}

TEST_F(KeyLimiterTest, ADroppedReservationSettlesWithWhatWasUsedSoFar) {
  KeyLimiter limiter("planner", LimitOptions{.tpm = 10'000, .concurrency = 1}, clock_);
  {
    AdmitResult r = limiter.admit(3'000, now());
    ASSERT_TRUE(r);
    r.reservation().setUsedSoFar(1'200);  // the stream was cut after 1200 tokens
  }
  EXPECT_EQ(limiter.tokenBucket()->remaining(now()), 8'800);
  EXPECT_EQ(limiter.inFlight(), 0u);
  {
    AdmitResult r = limiter.admit(3'000, now());  // dropped without any report
    ASSERT_TRUE(r);
  }
  EXPECT_EQ(limiter.tokenBucket()->remaining(now()), 5'800);  // the whole reservation stays
}

TEST_F(KeyLimiterTest, MovingAReservationMovesTheObligation) {
  KeyLimiter limiter("planner", LimitOptions{.tpm = 10'000, .concurrency = 2}, clock_);
  Reservation kept;
  {
    AdmitResult r = limiter.admit(1'000, now());
    ASSERT_TRUE(r);
    kept = std::move(r.reservation());
  }
  EXPECT_EQ(limiter.inFlight(), 1u);  // the moved-from one released nothing
  kept.settle(0, now());
  EXPECT_EQ(limiter.inFlight(), 0u);
  EXPECT_EQ(limiter.tokenBucket()->remaining(now()), 10'000);
}

TEST_F(KeyLimiterTest, HeadersReportLimitRemainingAndReset) {
  KeyLimiter limiter("planner", LimitOptions{.rpm = 600, .tpm = 200'000}, clock_);
  AdmitResult r = limiter.admit(30'000, now());
  ASSERT_TRUE(r);
  const RateLimitHeaders h = limiter.headers(now());
  ASSERT_EQ(h.fields().size(), 6u);
  EXPECT_EQ(h.fields()[0].name, "x-ratelimit-limit-requests");
  EXPECT_EQ(header(h, "x-ratelimit-limit-requests"), "600");
  EXPECT_EQ(header(h, "x-ratelimit-remaining-requests"), "599");
  EXPECT_EQ(header(h, "x-ratelimit-reset-requests"), "100ms");
  EXPECT_EQ(header(h, "x-ratelimit-limit-tokens"), "200000");
  EXPECT_EQ(header(h, "x-ratelimit-remaining-tokens"), "170000");
  EXPECT_EQ(header(h, "x-ratelimit-reset-tokens"), "9s");
  r.reservation().settle(230'000, now());  // deep in debt
  const RateLimitHeaders debt = limiter.headers(now());
  EXPECT_EQ(header(debt, "x-ratelimit-remaining-tokens"), "0");  // never negative
  EXPECT_EQ(header(debt, "x-ratelimit-reset-tokens"), "1m9s");
  clock_.advance(nanoseconds(1));
  EXPECT_EQ(header(limiter.headers(now()), "x-ratelimit-reset-requests"), "100ms");  // rounded up

  Headers out;
  limiter.headers(now()).appendTo(out);
  EXPECT_EQ(out.size(), 6u);
  EXPECT_EQ(out.get("x-ratelimit-limit-tokens"), "200000");
}

TEST_F(KeyLimiterTest, UnlimitedDimensionsAreLeftOut) {
  KeyLimiter onlyRequests("a", LimitOptions{.rpm = 60}, clock_);
  const RateLimitHeaders h = onlyRequests.headers(now());
  ASSERT_EQ(h.fields().size(), 3u);
  EXPECT_EQ(header(h, "x-ratelimit-reset-requests"), "0s");
  EXPECT_EQ(header(h, "x-ratelimit-limit-tokens"), "<absent>");

  KeyLimiter unlimited("b", LimitOptions{}, clock_);
  EXPECT_TRUE(unlimited.headers(now()).fields().empty());
  for (int i = 0; i < 1'000; ++i)
    EXPECT_TRUE(unlimited.admit(1'000'000, now()));
}

TEST_F(KeyLimiterTest, RetryAfterRoundsUpWithAFloorOfOne) {
  EXPECT_EQ(retryAfterSeconds(nanoseconds(1)), 1u);
  EXPECT_EQ(retryAfterSeconds(seconds(1)), 1u);
  EXPECT_EQ(retryAfterSeconds(seconds(1) + nanoseconds(1)), 2u);
  EXPECT_EQ(retryAfterSeconds(nanoseconds(0)), 1u);
  EXPECT_EQ(retryAfterMillis(nanoseconds(1)), 1u);
  EXPECT_EQ(retryAfterMillis(milliseconds(750)), 750u);
  EXPECT_EQ(retryAfterMillis(milliseconds(750) + nanoseconds(1)), 751u);
}

}  // namespace
}  // namespace relay::admission
