// Admission on one hot key from several threads: the cost a request pays for
// rate limiting when every worker hits the same key.
//
// BM_Bucket* compare the lock-free bucket (one 64-bit word, compare-exchange)
// with the obvious alternative, a bucket of (double tokens, last time) behind a
// per-bucket std::mutex, doing the same take + refund per iteration.
#include <benchmark/benchmark.h>
#include <chrono>
#include <cstdint>
#include <mutex>

#include "relay/admission/budget.hpp"
#include "relay/admission/key_limiter.hpp"
#include "relay/admission/token_bucket.hpp"

namespace {

using relay::admission::Budget;
using relay::admission::BudgetOptions;
using relay::admission::KeyLimiter;
using relay::admission::LimitOptions;
using relay::admission::SteadyTime;
using relay::admission::TokenBucket;
using relay::admission::WallTime;

const SteadyTime kNow = SteadyTime(std::chrono::seconds(1000));

// The comparison point: the textbook bucket under a mutex.
class MutexBucket {
 public:
  explicit MutexBucket(double perMinute) : rate_(perMinute / 60e9), capacity_(perMinute) {}
  bool tryTake(double n, std::int64_t now) {
    std::lock_guard lock(mutex_);
    refill(now);
    if (tokens_ < n) return false;
    tokens_ -= n;
    return true;
  }
  void refund(double n, std::int64_t now) {
    std::lock_guard lock(mutex_);
    refill(now);
    tokens_ = std::min(capacity_, tokens_ + n);
  }

 private:
  void refill(std::int64_t now) {
    if (now > last_) {
      tokens_ = std::min(capacity_, tokens_ + static_cast<double>(now - last_) * rate_);
      last_ = now;
    }
  }
  std::mutex mutex_;
  double rate_;
  double capacity_;
  double tokens_ = capacity_;
  std::int64_t last_ = 0;
};

TokenBucket gAtomicBucket(4'000'000'000);
MutexBucket gMutexBucket(4e9);

void BM_BucketAtomic_TakeRefund(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(gAtomicBucket.tryTake(100, kNow));
    gAtomicBucket.refund(100, kNow);
  }
}
BENCHMARK(BM_BucketAtomic_TakeRefund)->Threads(1)->Threads(2)->UseRealTime();

void BM_BucketMutex_TakeRefund(benchmark::State& state) {
  const std::int64_t now = kNow.time_since_epoch().count();
  for (auto _ : state) {
    benchmark::DoNotOptimize(gMutexBucket.tryTake(100, now));
    gMutexBucket.refund(100, now);
  }
}
BENCHMARK(BM_BucketMutex_TakeRefund)->Threads(1)->Threads(2)->UseRealTime();

// rpm, tpm and concurrency all limited (and never reached): every dimension
// is taken at admit and given back at settle. Requests are not refunded, so
// the request bucket is sized for any run length.
KeyLimiter gHotKey("hot",
                   LimitOptions{
                       .rpm = 4'000'000'000, .tpm = 1'000'000'000'000, .concurrency = 1'000'000});

void BM_AdmitSettle_HotKey(benchmark::State& state) {
  for (auto _ : state) {
    relay::admission::AdmitResult r = gHotKey.admit(1'200, kNow);
    if (!r) state.SkipWithError("refused");
    r.reservation().settle(900, kNow);
  }
}
BENCHMARK(BM_AdmitSettle_HotKey)->Threads(1)->Threads(2)->UseRealTime();

void BM_AdmitSettleHeaders_HotKey(benchmark::State& state) {
  for (auto _ : state) {
    relay::admission::AdmitResult r = gHotKey.admit(1'200, kNow);
    benchmark::DoNotOptimize(gHotKey.headers(kNow));
    r.reservation().settle(900, kNow);
  }
}
BENCHMARK(BM_AdmitSettleHeaders_HotKey)->Threads(1)->Threads(2)->UseRealTime();

// The headers alone for a key with everyday limits, part-way through a minute.
void BM_Headers_TypicalKey(benchmark::State& state) {
  KeyLimiter key("typical", LimitOptions{.rpm = 600, .tpm = 200'000, .concurrency = 16});
  for (int i = 0; i < 37; ++i)
    key.admit(1'234, kNow).reservation().settle(1'000, kNow);
  for (auto _ : state)
    benchmark::DoNotOptimize(key.headers(kNow));
}
BENCHMARK(BM_Headers_TypicalKey);

Budget gBudget("hot", BudgetOptions{.usd = 1e6}, WallTime(std::chrono::hours(500'000)));

void BM_BudgetCheckRecord_HotKey(benchmark::State& state) {
  const WallTime now = WallTime(std::chrono::hours(500'000));
  for (auto _ : state) {
    benchmark::DoNotOptimize(gBudget.check(now));
    gBudget.recordNanoUsd(relay::admission::toNanoUsd(0.0001), 1'000, 200, now);
  }
}
BENCHMARK(BM_BudgetCheckRecord_HotKey)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
