// Sliding-window quantiles (p50/p95/p99 over the last minute), exposed as a
// Prometheus summary (internal to the module).
//
// Why not prometheus::Summary: measured here, its Observe() costs 2-5 µs (a
// mutex, then CKMS inserts into five age buckets whose vector inserts and
// compactions are linear), and a request observes two of them — up to a fifth
// of the gateway's whole 47 µs budget. Its CKMS estimate also runs low on
// sparse windows (p99 of seven samples, two of them 2.5 s, read 0.12 s).
//
// Here: a log-linear histogram with 32 bins per power of two (each bin at
// most 3.2 % wide; quantiles read at the bin's middle, within ±1.6 %),
// counting microseconds up to 2^31 (35 min), in five rotating age slices of
// 12 s — prometheus-cpp's max_age 60 s and age_buckets 5. Observe() is three
// relaxed atomic adds; quantiles are computed only when scraped.
//
// Invariants: a slice holds the counts of one 12 s period (`period`); the
// first observer of a new period zeroes the slice under its mutex before
// counting into it; readers use only slices of the last five periods. An
// observation racing with a reset may be lost or land in the new period —
// a bounded, rare inaccuracy of an estimate, never a torn value.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <span>
#include <string>

#include <prometheus/labels.h>
#include <prometheus/metric_family.h>

namespace relay::telemetry::detail {

class WindowQuantiles {
 public:
  static constexpr int kSlices = 5;
  static constexpr std::int64_t kSliceMs = 12'000;
  static constexpr std::size_t kBins = 864;

  void observe(std::uint64_t micros, std::int64_t nowMs);

  // Nearest-rank quantiles (seconds) over the live slices at `nowMs`; NaN
  // when the window is empty.
  void quantiles(std::span<const double> qs, std::int64_t nowMs, std::span<double> out) const;

  std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  std::uint64_t sumMicros() const { return sumMicros_.load(std::memory_order_relaxed); }

  static std::size_t binOf(std::uint64_t micros);
  static double binMiddleMicros(std::size_t bin);

 private:
  struct Slice {
    std::atomic<std::int64_t> period{-1};
    std::array<std::atomic<std::uint32_t>, kBins> bins{};
    std::mutex reset;
  };
  void rotate(Slice& slice, std::int64_t period);

  std::array<Slice, kSlices> slices_;
  std::atomic<std::uint64_t> count_{0};      // since start, like a summary's _count
  std::atomic<std::uint64_t> sumMicros_{0};  // since start, exact
};

// A summary family of WindowQuantiles series, labelled like any other.
class WindowSummaryFamily {
 public:
  WindowSummaryFamily(std::string name, std::string help)
      : name_(std::move(name)), help_(std::move(help)) {}

  // The series of `labels`, created on first use; stable address.
  WindowQuantiles& add(const prometheus::Labels& labels);
  prometheus::MetricFamily collect(std::int64_t nowMs) const;

 private:
  struct Cell {
    prometheus::Labels labels;
    WindowQuantiles window;
  };
  const std::string name_, help_;
  mutable std::mutex mutex_;
  std::deque<Cell> cells_;
  std::map<prometheus::Labels, Cell*> byLabels_;
};

// Milliseconds of CLOCK_MONOTONIC_COARSE: a few ns to read, 1-4 ms resolution,
// plenty for 12 s slices.
std::int64_t coarseNowMs();

}  // namespace relay::telemetry::detail
