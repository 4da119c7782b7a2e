// Refill arithmetic, exact waits, debt and refunds of one bucket, with time
// given explicitly (never read from a real clock).
#include "relay/admission/token_bucket.hpp"

#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include <gtest/gtest.h>

namespace relay::admission {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

const SteadyTime kT0 = SteadyTime(seconds(1000));

TEST(TokenBucket, StartsFullAndBurstDefaultsToTheRate) {
  TokenBucket bucket(600);
  EXPECT_EQ(bucket.capacity(), 600u);
  EXPECT_EQ(bucket.remaining(kT0), 600);
  EXPECT_EQ(bucket.timeUntilFull(kT0), nanoseconds(0));
  TokenBucket burst(600, 10);
  EXPECT_EQ(burst.capacity(), 10u);
  EXPECT_EQ(burst.remaining(kT0), 10);
}

TEST(TokenBucket, ZeroRateIsRefused) {
  EXPECT_THROW(TokenBucket(0), std::invalid_argument);
}

TEST(TokenBucket, EmptiesThenRefillsContinuously) {
  TokenBucket bucket(600, 10);  // one token per 100 ms
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(bucket.tryTake(1, kT0).taken()) << i;
  EXPECT_EQ(bucket.remaining(kT0), 0);
  EXPECT_EQ(bucket.timeUntilFull(kT0), seconds(1));

  const TakeResult refused = bucket.tryTake(1, kT0);
  EXPECT_EQ(refused.status, TakeStatus::kWait);
  EXPECT_EQ(refused.wait, milliseconds(100));

  // 250 ms later: 2.5 tokens, reported as 2; three are 50 ms away.
  const SteadyTime t = kT0 + milliseconds(250);
  EXPECT_EQ(bucket.remaining(t), 2);
  EXPECT_EQ(bucket.timeUntilFull(t), milliseconds(750));
  EXPECT_EQ(bucket.peek(3, t).wait, milliseconds(50));
  EXPECT_TRUE(bucket.peek(2, t).taken());

  // Refill stops at capacity however long the bucket rests.
  EXPECT_EQ(bucket.remaining(kT0 + std::chrono::hours(5)), 10);
}

TEST(TokenBucket, TheReturnedWaitIsExactToTheNanosecond) {
  TokenBucket bucket(600, 10);
  ASSERT_TRUE(bucket.tryTake(10, kT0).taken());
  const TakeResult r = bucket.tryTake(4, kT0);
  ASSERT_EQ(r.status, TakeStatus::kWait);
  EXPECT_EQ(r.wait, milliseconds(400));
  const TakeResult early = bucket.tryTake(4, kT0 + r.wait - nanoseconds(1));
  EXPECT_EQ(early.status, TakeStatus::kWait);
  EXPECT_EQ(early.wait, nanoseconds(1));
  EXPECT_TRUE(bucket.tryTake(4, kT0 + r.wait).taken());
  EXPECT_EQ(bucket.remaining(kT0 + r.wait), 0);
}

TEST(TokenBucket, ExactWaitWhenTheRateDoesNotDivideAMinute) {
  TokenBucket bucket(7);  // one token per 8.571428571... s
  ASSERT_TRUE(bucket.tryTake(7, kT0).taken());
  EXPECT_EQ(bucket.timeUntilFull(kT0), seconds(60));
  // One token is back once 6 tokens' worth of debt (51428571428.57 ns) is left.
  const TakeResult r = bucket.tryTake(1, kT0);
  ASSERT_EQ(r.status, TakeStatus::kWait);
  EXPECT_EQ(r.wait, nanoseconds(60'000'000'000 - 51'428'571'428));
  EXPECT_FALSE(bucket.tryTake(1, kT0 + r.wait - nanoseconds(1)).taken());
  EXPECT_TRUE(bucket.tryTake(1, kT0 + r.wait).taken());
}

TEST(TokenBucket, MoreThanTheCapacityCanNeverBeTaken) {
  TokenBucket bucket(600, 10);
  const TakeResult r = bucket.tryTake(11, kT0);
  EXPECT_EQ(r.status, TakeStatus::kNever);
  EXPECT_EQ(r.wait, nanoseconds(0));
  EXPECT_EQ(bucket.remaining(kT0), 10);  // nothing taken
  EXPECT_EQ(bucket.peek(11, kT0 + std::chrono::hours(1)).status, TakeStatus::kNever);
  EXPECT_TRUE(bucket.tryTake(10, kT0).taken());  // exactly the capacity is fine
}

TEST(TokenBucket, RefundPutsBackButNeverAboveCapacity) {
  TokenBucket bucket(600, 10);
  ASSERT_TRUE(bucket.tryTake(5, kT0).taken());
  bucket.refund(3, kT0);
  EXPECT_EQ(bucket.remaining(kT0), 8);
  bucket.refund(100, kT0);
  EXPECT_EQ(bucket.remaining(kT0), 10);
  // The excess refund must not linger as credit that swallows a later charge.
  bucket.charge(2, kT0);
  EXPECT_EQ(bucket.remaining(kT0), 8);
  EXPECT_EQ(bucket.timeUntilFull(kT0), milliseconds(200));
}

TEST(TokenBucket, ChargeMayGoIntoDebtThatDelaysLaterRequests) {
  TokenBucket bucket(600, 10);
  bucket.charge(15, kT0);
  EXPECT_EQ(bucket.remaining(kT0), -5);
  EXPECT_EQ(bucket.timeUntilFull(kT0), milliseconds(1500));
  // One token needs the 5 owed plus 1: 600 ms.
  const TakeResult r = bucket.tryTake(1, kT0);
  EXPECT_EQ(r.status, TakeStatus::kWait);
  EXPECT_EQ(r.wait, milliseconds(600));
  EXPECT_EQ(bucket.remaining(kT0 + milliseconds(550)), 0);
  EXPECT_EQ(bucket.remaining(kT0 + milliseconds(499)), -1);
  EXPECT_TRUE(bucket.tryTake(1, kT0 + milliseconds(600)).taken());
}

TEST(TokenBucket, ChargeOnAFullBucketStartsFromNowNotFromThePast) {
  TokenBucket bucket(600, 10);
  ASSERT_TRUE(bucket.tryTake(10, kT0).taken());
  const SteadyTime later = kT0 + seconds(30);  // long full again
  bucket.charge(3, later);
  EXPECT_EQ(bucket.remaining(later), 7);
}

TEST(TokenBucket, HugeChargesSaturateInsteadOfOverflowing) {
  TokenBucket bucket(1, 1);
  bucket.charge(std::numeric_limits<std::uint64_t>::max(), kT0);
  bucket.charge(std::numeric_limits<std::uint64_t>::max(), kT0);
  EXPECT_EQ(bucket.timeUntilFull(kT0), nanoseconds(std::int64_t{1} << 61));
  EXPECT_LT(bucket.remaining(kT0), -1'000'000);
  EXPECT_FALSE(bucket.tryTake(1, kT0 + std::chrono::hours(24 * 365)).taken());
}

TEST(TokenBucket, LargeTokenRatesStayExact) {
  TokenBucket bucket(200'000);  // 300 us per token
  ASSERT_TRUE(bucket.tryTake(150'000, kT0).taken());
  EXPECT_EQ(bucket.remaining(kT0), 50'000);
  const TakeResult r = bucket.tryTake(80'000, kT0);
  ASSERT_EQ(r.status, TakeStatus::kWait);
  EXPECT_EQ(r.wait, seconds(9));  // 30000 tokens * 300 us
  EXPECT_EQ(bucket.timeUntilFull(kT0), seconds(45));
}

}  // namespace
}  // namespace relay::admission
