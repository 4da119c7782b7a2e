// A sum over a sliding window ("requests in the last minute", "spend in the
// last hour") in `Slices` rotating slices of `SliceMs`: the window read at
// time t covers the slice t falls in and the Slices - 1 before it, so between
// (Slices - 1) * SliceMs and Slices * SliceMs of history.
//
// add() is two relaxed atomic operations, plus — once per slice period, for
// the first adder of a new period — a short lock to zero the slice before
// counting into it (the same rotation as window_quantiles.hpp). A count
// racing with that reset may be lost or land in the new period: a rare,
// bounded inaccuracy of a display figure, never a torn value.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

namespace relay::telemetry {

template <int Slices, std::int64_t SliceMs>
class SlidingSum {
 public:
  static_assert(Slices >= 2 && SliceMs > 0);
  static constexpr std::int64_t kWindowMs = Slices * SliceMs;

  void add(std::uint64_t amount, std::int64_t nowMs) {
    const std::int64_t period = nowMs / SliceMs;
    Slice& s = slices_[static_cast<std::size_t>(period % Slices)];
    if (s.period.load(std::memory_order_acquire) != period) rotate(s, period);
    s.value.fetch_add(amount, std::memory_order_relaxed);
  }

  // The sum over the window that ends at `nowMs`.
  std::uint64_t sum(std::int64_t nowMs) const {
    const std::int64_t period = nowMs / SliceMs;
    std::uint64_t total = 0;
    for (const Slice& s : slices_) {
      const std::int64_t p = s.period.load(std::memory_order_acquire);
      if (p <= period && p > period - Slices) total += s.value.load(std::memory_order_relaxed);
    }
    return total;
  }

 private:
  struct Slice {
    std::atomic<std::int64_t> period{-1};
    std::atomic<std::uint64_t> value{0};
    std::mutex reset;
  };

  static void rotate(Slice& s, std::int64_t period) {
    std::lock_guard lock(s.reset);
    if (s.period.load(std::memory_order_relaxed) >= period) return;  // another adder did it
    s.value.store(0, std::memory_order_relaxed);
    s.period.store(period, std::memory_order_release);
  }

  std::array<Slice, Slices> slices_;
};

}  // namespace relay::telemetry
