#include "histogram.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace relay::telemetry::detail {

HistogramBounds::HistogramBounds(std::vector<double> seconds) : seconds_(std::move(seconds)) {
  micros_.reserve(seconds_.size());
  for (double b : seconds_) {
    // The largest u with u / 1e6 <= b: the comparison prometheus::Histogram
    // makes on seconds(u), for every whole u.
    auto u = static_cast<std::uint64_t>(std::max(0.0, std::floor(b * 1e6)));
    while (static_cast<double>(u + 1) / 1e6 <= b)
      ++u;
    while (u > 0 && static_cast<double>(u) / 1e6 > b)
      --u;
    micros_.push_back(u);
  }
}

std::size_t HistogramBounds::bucketOf(std::uint64_t micros) const {
  return static_cast<std::size_t>(std::lower_bound(micros_.begin(), micros_.end(), micros) -
                                  micros_.begin());
}

LatencyHistogram::LatencyHistogram(const HistogramBounds& bounds)
    : bounds_(&bounds), counts_(new std::atomic<std::uint64_t>[bounds.size() + 1]) {
  for (std::size_t i = 0; i <= bounds.size(); ++i)
    counts_[i].store(0, std::memory_order_relaxed);
}

prometheus::ClientMetric::Histogram LatencyHistogram::read() const {
  prometheus::ClientMetric::Histogram h;
  std::uint64_t cumulative = 0;
  const std::vector<double>& upper = bounds_->seconds();
  h.bucket.reserve(upper.size() + 1);
  for (std::size_t i = 0; i <= upper.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    prometheus::ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound = i < upper.size() ? upper[i] : std::numeric_limits<double>::infinity();
    h.bucket.push_back(b);
  }
  h.sample_count = cumulative;
  h.sample_sum = static_cast<double>(sumMicros_.load(std::memory_order_relaxed)) / 1e6;
  return h;
}

LatencyHistogram& HistogramFamily::add(const prometheus::Labels& labels) {
  std::lock_guard lock(mutex_);
  if (auto it = byLabels_.find(labels); it != byLabels_.end()) return it->second->histogram;
  Cell& cell = cells_.emplace_back(labels, bounds_);
  byLabels_.emplace(labels, &cell);
  return cell.histogram;
}

prometheus::MetricFamily HistogramFamily::collect() const {
  prometheus::MetricFamily f;
  f.name = name_;
  f.help = help_;
  f.type = prometheus::MetricType::Histogram;
  std::lock_guard lock(mutex_);
  for (const auto& [labels, cell] : byLabels_) {
    prometheus::ClientMetric m;
    for (const auto& [name, value] : labels)
      m.label.push_back({name, value});
    m.histogram = cell->histogram.read();
    f.metric.push_back(std::move(m));
  }
  return f;
}

}  // namespace relay::telemetry::detail
