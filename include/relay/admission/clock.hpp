// Time as admission sees it. Buckets measure intervals on the monotonic clock;
// budgets cut periods on UTC calendar boundaries, so they read the wall clock.
// Every decision takes `now` as an argument; the one place that must read the
// time on its own (a reservation dropped without settle) asks a `Clock`, which
// tests replace with `ManualClock` so that nothing ever sleeps.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace relay::admission {

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime steadyNow() const = 0;
  virtual WallTime wallNow() const = 0;
};

// The real clocks. One shared instance is enough: it has no state.
// The wall clock can be set off the system's by KIMI_RELAY_CLOCK_OFFSET_S
// seconds (read once; for tests: a replica whose clock is behind Redis's).
class SystemClock final : public Clock {
 public:
  SteadyTime steadyNow() const override { return std::chrono::steady_clock::now(); }
  WallTime wallNow() const override { return std::chrono::system_clock::now() + offset_; }
  static const SystemClock& instance();

 private:
  explicit SystemClock(std::chrono::seconds offset) : offset_(offset) {}
  std::chrono::seconds offset_;
};

// A clock that moves only when told to. Safe to read and advance from several
// threads (tests hammer limiters from many threads while one advances time).
class ManualClock final : public Clock {
 public:
  // Steady time starts at 1 s after the steady epoch (buckets need times >= 0);
  // wall time starts wherever the test says.
  explicit ManualClock(WallTime wallStart = WallTime{})
      : steadyNs_(1'000'000'000), wallNs_(toNs(wallStart.time_since_epoch())) {}

  SteadyTime steadyNow() const override {
    return SteadyTime(std::chrono::nanoseconds(steadyNs_.load(std::memory_order_relaxed)));
  }
  WallTime wallNow() const override {
    return WallTime(std::chrono::duration_cast<WallTime::duration>(
        std::chrono::nanoseconds(wallNs_.load(std::memory_order_relaxed))));
  }

  // Moves both clocks forward together, as real time does.
  void advance(std::chrono::nanoseconds d) {
    steadyNs_.fetch_add(d.count(), std::memory_order_relaxed);
    wallNs_.fetch_add(d.count(), std::memory_order_relaxed);
  }

 private:
  template <typename D>
  static std::int64_t toNs(D d) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  }
  std::atomic<std::int64_t> steadyNs_;
  std::atomic<std::int64_t> wallNs_;
};

}  // namespace relay::admission
