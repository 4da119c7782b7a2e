#include "relay/upstream/shaping.hpp"

#include <atomic>
#include <latch>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace relay::upstream {
namespace {

using std::chrono::nanoseconds;

SteadyTime at(std::int64_t ms) {
  return SteadyTime(Millis(ms));
}

TEST(ConcurrencyLimit, RefusesBeyondTheCapAndFreesOnRelease) {
  ConcurrencyLimit limit(2);
  ConcurrencyPermit a = limit.tryAcquire();
  ConcurrencyPermit b = limit.tryAcquire();
  EXPECT_TRUE(a);
  EXPECT_TRUE(b);
  EXPECT_FALSE(limit.tryAcquire());
  EXPECT_EQ(limit.inFlight(), 2u);
  a.release();
  EXPECT_EQ(limit.inFlight(), 1u);
  ConcurrencyPermit c = limit.tryAcquire();
  EXPECT_TRUE(c);
  EXPECT_FALSE(limit.tryAcquire());
}

TEST(ConcurrencyLimit, PermitsReleaseExactlyOnceWhenMovedOrDestroyed) {
  ConcurrencyLimit limit(1);
  {
    ConcurrencyPermit a = limit.tryAcquire();
    ConcurrencyPermit b = std::move(a);
    EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
    EXPECT_EQ(limit.inFlight(), 1u);
    ConcurrencyPermit c;
    c = std::move(b);
    c.release();
    c.release();
    EXPECT_EQ(limit.inFlight(), 0u);
    ConcurrencyPermit d = limit.tryAcquire();
    EXPECT_TRUE(d);
  }
  EXPECT_EQ(limit.inFlight(), 0u);
}

TEST(ConcurrencyLimit, ZeroMeansUnlimitedButStillCounted) {
  ConcurrencyLimit limit(0);
  std::vector<ConcurrencyPermit> permits;
  for (int i = 0; i < 1'000; ++i)
    permits.push_back(limit.tryAcquire());
  EXPECT_TRUE(permits.back());
  EXPECT_EQ(limit.inFlight(), 1'000u);
}

TEST(ConcurrencyLimit, NeverExceededUnderContention) {
  constexpr int kThreads = 8;
  constexpr std::uint32_t kCap = 3;
  ConcurrencyLimit limit(kCap);
  std::atomic<std::uint32_t> holders{0};
  std::atomic<std::uint32_t> highest{0};
  std::atomic<int> acquired{0};
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int j = 0; j < 20'000; ++j) {
        ConcurrencyPermit p = limit.tryAcquire();
        if (!p) continue;
        ++acquired;
        const std::uint32_t now = ++holders;
        std::uint32_t seen = highest.load();
        while (now > seen && !highest.compare_exchange_weak(seen, now)) {
        }
        --holders;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_LE(highest.load(), kCap);
  EXPECT_GT(acquired.load(), 0);
  EXPECT_EQ(limit.inFlight(), 0u);
}

TEST(RateLimit, RpmIntervalsRoundUp) {
  EXPECT_EQ(RateLimit::perMinute(60), nanoseconds(1'000'000'000));
  EXPECT_EQ(RateLimit::perMinute(3'000), nanoseconds(20'000'000));
  EXPECT_EQ(RateLimit::perMinute(7), nanoseconds(8'571'428'572));
  EXPECT_EQ(RateLimit::perMinute(0), nanoseconds(0));
  EXPECT_EQ(RateLimit::perSecond(5), nanoseconds(200'000'000));
  EXPECT_EQ(RateLimit::perSecond(0.5), nanoseconds(2'000'000'000));
}

TEST(RateLimit, DefaultBurstIsOneSecondsWorth) {
  EXPECT_EQ(effectiveRpmBurst({.rpm = 3'000}), 50u);
  EXPECT_EQ(effectiveRpmBurst({.rpm = 60}), 1u);
  EXPECT_EQ(effectiveRpmBurst({.rpm = 30}), 1u);
  EXPECT_EQ(effectiveRpmBurst({.rpm = 3'000, .rpmBurst = 7}), 7u);
}

TEST(RateLimit, RefusalSaysExactlyWhenTheNextRequestFits) {
  RateLimit r(RateLimit::perMinute(60), 1);
  EXPECT_TRUE(r.tryAcquire(at(5'000)).admitted);
  RateLimit::Result refused = r.tryAcquire(at(5'000));
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.retryAt, at(6'000));
  EXPECT_EQ(r.tryAcquire(at(5'999)).retryAt, at(6'000));
  EXPECT_TRUE(r.tryAcquire(at(6'000)).admitted);
  EXPECT_EQ(r.tryAcquire(at(6'000)).retryAt, at(7'000));
}

TEST(RateLimit, BurstThenSteadyRate) {
  ShapingOptions o{.rpm = 3'000};
  RateLimit r(RateLimit::perMinute(o.rpm), effectiveRpmBurst(o));
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(r.tryAcquire(at(0)).admitted) << i;
  RateLimit::Result refused = r.tryAcquire(at(0));
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.retryAt, at(20));
  EXPECT_FALSE(r.tryAcquire(at(19)).admitted);
  EXPECT_TRUE(r.tryAcquire(at(20)).admitted);
  EXPECT_FALSE(r.tryAcquire(at(20)).admitted);
  // A long idle spell refills the burst, no more.
  int admitted = 0;
  while (r.tryAcquire(at(100'000)).admitted)
    ++admitted;
  EXPECT_EQ(admitted, 50);
}

TEST(RateLimit, NoMinuteEverSeesMoreThanRpmPlusBurst) {
  RateLimit r(RateLimit::perMinute(120), 2);
  int admitted = 0;
  for (std::int64_t ms = 0; ms < 60'000; ms += 7)
    admitted += r.tryAcquire(at(ms)).admitted;
  EXPECT_LE(admitted, 122);
  EXPECT_GE(admitted, 120);
}

TEST(RateLimit, RefundGivesBackTheLastAdmission) {
  RateLimit r(RateLimit::perMinute(60), 1);
  EXPECT_TRUE(r.tryAcquire(at(0)).admitted);
  r.refund();
  EXPECT_TRUE(r.tryAcquire(at(0)).admitted);
  EXPECT_FALSE(r.tryAcquire(at(0)).admitted);
}

TEST(RateLimit, UnlimitedAlwaysAdmits) {
  RateLimit r;
  EXPECT_TRUE(r.unlimited());
  for (int i = 0; i < 10'000; ++i)
    ASSERT_TRUE(r.tryAcquire(at(0)).admitted);
}

TEST(RateLimit, ConcurrentAcquirersShareTheBurstExactly) {
  constexpr int kThreads = 8;
  RateLimit r(RateLimit::perMinute(6'000), 100);
  std::atomic<int> admitted{0};
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int j = 0; j < 1'000; ++j)
        admitted += r.tryAcquire(at(0)).admitted;
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(admitted.load(), 100);
}

}  // namespace
}  // namespace relay::upstream
