// Many threads on one bucket or one key: no token may be created or lost and
// no concurrency slot handed out twice.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "relay/admission/clock.hpp"
#include "relay/admission/key_limiter.hpp"
#include "relay/admission/token_bucket.hpp"

namespace relay::admission {
namespace {

using std::chrono::nanoseconds;
using std::chrono::seconds;

constexpr int kThreads = 4;
const SteadyTime kT0 = SteadyTime(seconds(1000));

// Starts all threads at once so that they really overlap.
template <typename Body>
void runTogether(Body body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      body(t);
    });
  }
  for (auto& th : threads)
    th.join();
}

TEST(BucketThreads, FrozenTimeHandsOutExactlyTheCapacity) {
  constexpr std::uint64_t kCapacity = 2'000'000;
  TokenBucket bucket(kCapacity);
  std::atomic<std::uint64_t> taken{0};
  runTogether([&](int) {
    std::uint64_t mine = 0;
    while (bucket.tryTake(1, kT0).taken())
      ++mine;
    taken.fetch_add(mine);
  });
  EXPECT_EQ(taken.load(), kCapacity);
  EXPECT_EQ(bucket.remaining(kT0), 0);
  EXPECT_EQ(bucket.timeUntilFull(kT0), seconds(60));
}

TEST(BucketThreads, TakesRefundsAndChargesAddUpExactly) {
  // 6'000'000 per minute: exactly 10 us per token, so every step is exact; the
  // capacity is large enough that most takes succeed and write.
  constexpr std::uint64_t kRate = 6'000'000;
  TokenBucket bucket(kRate);
  std::atomic<std::int64_t> net{0};  // tokens out of the bucket, summed over threads
  std::atomic<int> refused{0};
  runTogether([&](int t) {
    std::mt19937 rng(static_cast<unsigned>(t) + 1);
    std::int64_t mine = 0;
    for (int i = 0; i < 200'000; ++i) {
      const std::uint64_t n = rng() % 7 + 1;
      if (!bucket.tryTake(n, kT0).taken()) {
        refused.fetch_add(1);
        continue;
      }
      mine += static_cast<std::int64_t>(n);
      switch (rng() % 3) {
        case 0: {  // settle under the reservation: refund part of what this thread took
          const std::uint64_t back = rng() % (n + 1);
          bucket.refund(back, kT0);
          mine -= static_cast<std::int64_t>(back);
          break;
        }
        case 1: {  // settle over it: charge extra
          const std::uint64_t extra = rng() % 3;
          bucket.charge(extra, kT0);
          mine += static_cast<std::int64_t>(extra);
          break;
        }
        default:
          break;
      }
    }
    net.fetch_add(mine);
  });
  EXPECT_EQ(refused.load(), 0);
  const std::int64_t out = net.load();
  // Refunds here never exceed what is outstanding, so nothing was clamped:
  // the bucket owes exactly `out` tokens of refill.
  EXPECT_EQ(bucket.remaining(kT0), static_cast<std::int64_t>(kRate) - out);
  EXPECT_EQ(bucket.timeUntilFull(kT0), nanoseconds(out * 10'000));
}

TEST(BucketThreads, WhileTimeMovesNoMoreIsTakenThanCapacityPlusRefill) {
  constexpr std::uint64_t kRate = 60'000;  // one token per millisecond
  constexpr std::uint64_t kCapacity = 1'000;
  ManualClock clock;
  const SteadyTime start = clock.steadyNow();
  TokenBucket bucket(kRate, kCapacity);
  std::atomic<std::uint64_t> taken{0};
  runTogether([&](int t) {
    std::uint64_t mine = 0;
    for (int i = 0; i < 100'000; ++i) {
      // One thread moves time on while the others take.
      if (t == 0 && i % 50 == 0) clock.advance(std::chrono::microseconds(250));
      if (bucket.tryTake(1, clock.steadyNow()).taken()) ++mine;
    }
    taken.fetch_add(mine);
  });
  const SteadyTime end = clock.steadyNow();
  const auto refill = static_cast<std::uint64_t>((end - start) / std::chrono::milliseconds(1));
  EXPECT_LE(taken.load(), kCapacity + refill);
  // What is left plus what was taken can exceed the capacity only by what
  // refilled: the bucket accounts for every token.
  const std::int64_t left = bucket.remaining(end);
  EXPECT_GE(left, 0);
  EXPECT_LE(taken.load() + static_cast<std::uint64_t>(left), kCapacity + refill);
  EXPECT_GE(taken.load(), kCapacity);  // the whole initial burst went out
}

TEST(LimiterThreads, SlotsAndBothBucketsStayExactUnderContention) {
  constexpr std::uint32_t kRequests = 100'000;  // half the attempts below
  constexpr std::uint64_t kTokens = 60'000'000;
  constexpr std::uint32_t kSlots = 1;  // 2 cores here: a higher cap could never be exceeded
  ManualClock clock;
  KeyLimiter limiter(
      "hot",
      LimitOptions{.rpm = 600'000, .rpmBurst = kRequests, .tpm = kTokens, .concurrency = kSlots},
      clock);
  const SteadyTime now = clock.steadyNow();  // frozen: no refill
  std::atomic<std::uint64_t> admitted{0};
  std::atomic<std::uint32_t> holding{0};
  std::atomic<std::uint32_t> mostHeld{0};
  runTogether([&](int) {
    std::uint64_t mine = 0;
    for (int i = 0; i < 50'000; ++i) {
      AdmitResult r = limiter.admit(10, now);
      if (!r) continue;
      ++mine;
      const std::uint32_t held = holding.fetch_add(1) + 1;
      std::uint32_t seen = mostHeld.load();
      while (held > seen && !mostHeld.compare_exchange_weak(seen, held)) {
      }
      std::this_thread::yield();  // hold the slot a little, as a real exchange does
      holding.fetch_sub(1);
      r.reservation().settle(11, now);  // one token more than reserved
    }
    admitted.fetch_add(mine);
  });
  const std::uint64_t a = admitted.load();
  EXPECT_GT(a, 0u);
  EXPECT_LE(mostHeld.load(), kSlots);
  EXPECT_EQ(limiter.inFlight(), 0u);
  // Every admitted request took exactly one request and 11 tokens; every
  // refusal (requests, concurrency, or a lost race after the look) took none.
  EXPECT_EQ(limiter.requestBucket()->remaining(now), static_cast<std::int64_t>(kRequests - a));
  EXPECT_EQ(limiter.tokenBucket()->remaining(now), static_cast<std::int64_t>(kTokens - 11 * a));
}

}  // namespace
}  // namespace relay::admission
