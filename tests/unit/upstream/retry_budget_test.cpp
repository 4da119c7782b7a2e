#include "relay/upstream/retry_budget.hpp"

#include <atomic>
#include <cmath>
#include <latch>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace relay::upstream {
namespace {

SteadyTime at(std::int64_t ms) {
  return SteadyTime(Millis(ms));
}

int drain(RetryBudget& b, SteadyTime now, int tries) {
  int granted = 0;
  for (int i = 0; i < tries; ++i)
    granted += b.tryRetry(now) != RetryGrant::kRefused;
  return granted;
}

TEST(RetryBudget, ABurstOfFailuresGetsRatioTimesFirstsPlusTheFloor) {
  RetryBudget b({.ratio = 0.2, .minPerSecond = 5});
  const SteadyTime t = at(1'000);
  for (int i = 0; i < 100; ++i)
    b.onFirstAttempt(t);
  // 100 first attempts earn 20 retries; the floor adds 5. Not one more.
  EXPECT_EQ(drain(b, t, 1'000), 25);
  EXPECT_EQ(b.retriesGranted(), 25u);
  EXPECT_EQ(b.retriesRefused(), 975u);
}

TEST(RetryBudget, DepositsAreSpentBeforeTheFloor) {
  RetryBudget b({.ratio = 0.5, .minPerSecond = 1});
  const SteadyTime t = at(0);
  b.onFirstAttempt(t);
  b.onFirstAttempt(t);
  EXPECT_EQ(b.tryRetry(t), RetryGrant::kDeposit);
  EXPECT_EQ(b.tryRetry(t), RetryGrant::kFloor);
  EXPECT_EQ(b.tryRetry(t), RetryGrant::kRefused);
}

TEST(RetryBudget, TheFloorRefillsAtMinPerSecond) {
  RetryBudget b({.ratio = 0.2, .minPerSecond = 5});
  EXPECT_EQ(drain(b, at(0), 100), 5);  // one second's worth at once
  EXPECT_EQ(drain(b, at(199), 100), 0);
  EXPECT_EQ(drain(b, at(200), 100), 1);  // then one every 200 ms
  EXPECT_EQ(drain(b, at(399), 100), 0);
  EXPECT_EQ(drain(b, at(400), 100), 1);
  EXPECT_EQ(drain(b, at(10'000), 100), 5);  // idle time refills only up to the burst
}

TEST(RetryBudget, FractionalDepositsAddUpExactly) {
  RetryBudget b({.ratio = 0.2, .minPerSecond = 0});
  const SteadyTime t = at(0);
  for (int i = 0; i < 4; ++i)
    b.onFirstAttempt(t);
  EXPECT_EQ(b.tryRetry(t), RetryGrant::kRefused);  // 0.8 tokens
  b.onFirstAttempt(t);
  EXPECT_EQ(b.tryRetry(t), RetryGrant::kDeposit);  // 1.0
  EXPECT_EQ(b.tryRetry(t), RetryGrant::kRefused);
}

TEST(RetryBudget, ZeroRatioAndNoFloorRefusesEveryRetry) {
  RetryBudget b({.ratio = 0, .minPerSecond = 0});
  for (int i = 0; i < 1'000; ++i)
    b.onFirstAttempt(at(0));
  EXPECT_EQ(drain(b, at(0), 10), 0);
}

TEST(RetryBudget, DepositsFadeSoOldCreditCannotFundARetryStorm) {
  RetryBudget b({.ratio = 0.2, .minPerSecond = 0, .memory = Millis(10'000)});
  for (int i = 0; i < 1'000; ++i)
    b.onFirstAttempt(at(0));
  EXPECT_DOUBLE_EQ(b.balance(at(0)), 200.0);
  EXPECT_NEAR(b.balance(at(10'000)), 200.0 * std::exp(-1.0), 1e-3);
  EXPECT_NEAR(b.balance(at(60'000)), 200.0 * std::exp(-6.0), 1e-3);
  EXPECT_EQ(drain(b, at(10'000), 500), 73);  // floor(200 / e)
}

TEST(RetryBudget, AReadingFromASlightlyEarlierClockDoesNotWipeTheBalance) {
  RetryBudget b({.ratio = 1, .minPerSecond = 0});
  b.onFirstAttempt(at(5'000));
  b.onFirstAttempt(at(4'999));  // another worker's `now`, read a moment earlier
  EXPECT_DOUBLE_EQ(b.balance(at(5'000)), 2.0);
}

TEST(RetryBudget, RefundReturnsTheTokenToWhereItCameFrom) {
  RetryBudget b({.ratio = 1, .minPerSecond = 1});
  const SteadyTime t = at(0);
  b.onFirstAttempt(t);
  const RetryGrant fromDeposit = b.tryRetry(t);
  const RetryGrant fromFloor = b.tryRetry(t);
  ASSERT_EQ(fromDeposit, RetryGrant::kDeposit);
  ASSERT_EQ(fromFloor, RetryGrant::kFloor);
  EXPECT_EQ(b.tryRetry(t), RetryGrant::kRefused);
  b.refund(fromFloor, t);
  b.refund(fromDeposit, t);
  EXPECT_EQ(b.retriesGranted(), 0u);
  EXPECT_EQ(b.tryRetry(t), RetryGrant::kDeposit);
  EXPECT_EQ(b.tryRetry(t), RetryGrant::kFloor);
  EXPECT_EQ(b.tryRetry(t), RetryGrant::kRefused);
}

TEST(RetryBudget, ConcurrentWorkersNeverExceedTheBudget) {
  RetryBudget b({.ratio = 0.2, .minPerSecond = 5});
  const SteadyTime t = at(0);
  constexpr int kThreads = 8;
  constexpr int kFirstsPerThread = 1'000;
  std::atomic<int> granted{0};
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int j = 0; j < kFirstsPerThread; ++j) {
        b.onFirstAttempt(t);
        // Every first attempt fails and tries three retries.
        for (int r = 0; r < 3; ++r)
          granted += b.tryRetry(t) != RetryGrant::kRefused;
      }
    });
  }
  for (auto& th : threads)
    th.join();
  // 8,000 first attempts * 0.2 + 5: interleaving can only cost grants, never add.
  EXPECT_LE(granted.load(), 1'605);
  EXPECT_GE(granted.load(), 1'600);
  EXPECT_EQ(b.retriesGranted(), static_cast<std::uint64_t>(granted.load()));
  EXPECT_EQ(b.tryRetry(t), RetryGrant::kRefused);
}

}  // namespace
}  // namespace relay::upstream
