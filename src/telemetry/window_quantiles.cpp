#include "window_quantiles.hpp"

#include <bit>
#include <cmath>
#include <limits>

#include "relay/common/coarse_clock.hpp"

namespace relay::telemetry::detail {
namespace {

constexpr int kSubBits = 5;                       // 32 bins per power of two
constexpr std::uint64_t kExact = 2u << kSubBits;  // below 64 µs every value has a bin
constexpr std::uint64_t kMaxMicros = (1ULL << 31) - 1;
constexpr double kQuantiles[] = {0.5, 0.95, 0.99};

}  // namespace

std::size_t WindowQuantiles::binOf(std::uint64_t v) {
  v = std::min(v, kMaxMicros);
  if (v < kExact) return static_cast<std::size_t>(v);
  const int exp = std::bit_width(v) - 1;  // ≥ kSubBits + 1
  const int shift = exp - kSubBits;
  const std::uint64_t mantissa = v >> shift;  // in [32, 64)
  return static_cast<std::size_t>(shift + 1) * (1u << kSubBits) +
         static_cast<std::size_t>(mantissa - (1u << kSubBits));
}

double WindowQuantiles::binMiddleMicros(std::size_t bin) {
  if (bin < kExact) return static_cast<double>(bin);
  const std::size_t shift = bin / (1u << kSubBits) - 1;
  const std::uint64_t mantissa = bin % (1u << kSubBits) + (1u << kSubBits);
  const double lower = static_cast<double>(mantissa << shift);
  return lower + static_cast<double>(1ULL << shift) / 2;
}

void WindowQuantiles::observe(std::uint64_t micros, std::int64_t nowMs) {
  const std::int64_t period = nowMs / kSliceMs;
  Slice& slice = slices_[static_cast<std::size_t>(period % kSlices)];
  if (slice.period.load(std::memory_order_acquire) != period) rotate(slice, period);
  slice.bins[binOf(micros)].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sumMicros_.fetch_add(micros, std::memory_order_relaxed);
}

void WindowQuantiles::rotate(Slice& slice, std::int64_t period) {
  std::lock_guard lock(slice.reset);
  // Only forward: a thread whose clock read is a period behind counts into
  // the slice as it is rather than wiping newer counts.
  if (slice.period.load(std::memory_order_relaxed) >= period) return;
  for (auto& b : slice.bins)
    b.store(0, std::memory_order_relaxed);
  slice.period.store(period, std::memory_order_release);
}

void WindowQuantiles::quantiles(std::span<const double> qs, std::int64_t nowMs,
                                std::span<double> out) const {
  const std::int64_t current = nowMs / kSliceMs;
  std::array<std::uint64_t, kBins> merged{};
  std::uint64_t total = 0;
  for (const Slice& slice : slices_) {
    const std::int64_t p = slice.period.load(std::memory_order_acquire);
    if (p < 0 || p > current || p <= current - kSlices) continue;
    for (std::size_t i = 0; i < kBins; ++i) {
      const std::uint32_t n = slice.bins[i].load(std::memory_order_relaxed);
      merged[i] += n;
      total += n;
    }
  }
  for (std::size_t k = 0; k < qs.size() && k < out.size(); ++k) {
    if (total == 0) {
      out[k] = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    // Nearest rank: the smallest value with at least ceil(q·n) samples ≤ it.
    const auto rank = std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(std::ceil(qs[k] * static_cast<double>(total))));
    std::uint64_t seen = 0;
    std::size_t bin = 0;
    for (; bin < kBins; ++bin) {
      seen += merged[bin];
      if (seen >= rank) break;
    }
    out[k] = binMiddleMicros(std::min(bin, kBins - 1)) / 1e6;
  }
}

WindowQuantiles& WindowSummaryFamily::add(const prometheus::Labels& labels) {
  std::lock_guard lock(mutex_);
  if (auto it = byLabels_.find(labels); it != byLabels_.end()) return it->second->window;
  Cell& cell = cells_.emplace_back();
  cell.labels = labels;
  byLabels_.emplace(labels, &cell);
  return cell.window;
}

prometheus::MetricFamily WindowSummaryFamily::collect(std::int64_t nowMs) const {
  prometheus::MetricFamily f;
  f.name = name_;
  f.help = help_;
  f.type = prometheus::MetricType::Summary;
  std::lock_guard lock(mutex_);
  for (const Cell& cell : cells_) {
    prometheus::ClientMetric m;
    for (const auto& [name, value] : cell.labels)
      m.label.push_back({name, value});
    m.summary.sample_count = cell.window.count();
    m.summary.sample_sum = static_cast<double>(cell.window.sumMicros()) / 1e6;
    std::array<double, std::size(kQuantiles)> values{};
    cell.window.quantiles(kQuantiles, nowMs, values);
    for (std::size_t i = 0; i < values.size(); ++i) {
      m.summary.quantile.push_back({kQuantiles[i], values[i]});
    }
    f.metric.push_back(std::move(m));
  }
  return f;
}

std::int64_t coarseNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(coarseSteadyNow().time_since_epoch())
      .count();
}

}  // namespace relay::telemetry::detail
