// Latency histograms, exposed as Prometheus histograms (internal to the
// module).
//
// Why not prometheus::Histogram: its Observe() takes a mutex, searches the
// bounds as doubles and adds the sum through a Gauge — about 200
// instructions, and a request observes three or four. Here the bounds are
// whole microseconds (what a RequestRecord carries), so an observation is one
// binary search over integers and three relaxed atomic adds, with no lock.
//
// Exactness: a bound b (seconds) is held as the largest whole number of
// microseconds u with u / 1e6 <= b, so an observation lands in the bucket
// prometheus::Histogram would have put it in. The sum is kept in whole
// microseconds (exact; the records have no finer time). A scrape reads the
// buckets and the sum one by one without a lock: an observation racing with
// it may be in the buckets and not yet in the sum (or in a later bucket and
// not an earlier one's cumulative count) — by at most the observations in
// flight, never a torn value.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <prometheus/labels.h>
#include <prometheus/metric_family.h>

namespace relay::telemetry::detail {

// Upper bounds, ascending, in seconds (for the exposition) and microseconds.
class HistogramBounds {
 public:
  explicit HistogramBounds(std::vector<double> seconds);
  const std::vector<double>& seconds() const { return seconds_; }
  // The bucket of an observation: the first bound >= it, or size() for +Inf.
  std::size_t bucketOf(std::uint64_t micros) const;
  std::size_t size() const { return micros_.size(); }

 private:
  std::vector<double> seconds_;
  std::vector<std::uint64_t> micros_;
};

class LatencyHistogram {
 public:
  explicit LatencyHistogram(const HistogramBounds& bounds);

  void observe(std::uint64_t micros) {
    counts_[bounds_->bucketOf(micros)].fetch_add(1, std::memory_order_relaxed);
    sumMicros_.fetch_add(micros, std::memory_order_relaxed);
  }

  // Cumulative bucket counts (the +Inf bucket last) and the sum, in seconds.
  prometheus::ClientMetric::Histogram read() const;

 private:
  const HistogramBounds* bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;  // size() + 1: the last is +Inf
  std::atomic<std::uint64_t> sumMicros_{0};
};

// A histogram family: one LatencyHistogram per label set, all on one set of
// bounds. Series are never removed (as with prometheus::Family, which the
// gateway never asked to remove them either).
class HistogramFamily {
 public:
  HistogramFamily(std::string name, std::string help, std::vector<double> boundsSeconds)
      : name_(std::move(name)), help_(std::move(help)), bounds_(std::move(boundsSeconds)) {}

  // The series of `labels`, created on first use; stable address.
  LatencyHistogram& add(const prometheus::Labels& labels);
  prometheus::MetricFamily collect() const;

 private:
  struct Cell {
    Cell(prometheus::Labels l, const HistogramBounds& b) : labels(std::move(l)), histogram(b) {}
    prometheus::Labels labels;
    LatencyHistogram histogram;
  };
  const std::string name_, help_;
  const HistogramBounds bounds_;
  mutable std::mutex mutex_;
  std::deque<Cell> cells_;  // deque: emplace_back never moves existing cells
  std::map<prometheus::Labels, Cell*> byLabels_;
};

}  // namespace relay::telemetry::detail
