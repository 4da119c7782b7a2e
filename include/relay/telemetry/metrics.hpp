// The gateway's Prometheus metrics: one registry for the whole process.
//
// Metrics outlives every config snapshot: counters keep counting across
// reloads. Each snapshot builds a Telemetry (telemetry.hpp) over it, which
// resolves series once and caches them, so the hot path never takes the
// registry's locks. docs/metrics.md lists every metric.
//
// prometheus-cpp stays behind this header (a forward-declared implementation),
// so the pipeline does not compile its headers.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "relay/telemetry/record.hpp"

namespace relay::telemetry {

namespace detail {
struct Families;
}

// Histogram buckets (upper bounds, seconds). Latency: 1 ms … 600 s in ten
// steps per decade (1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8: ratio ≤ 1.33), so
// histogram_quantile's interpolation error stays within about ±15 %.
// Overhead: 10 µs … 100 ms with the same steps.
std::vector<double> latencyBuckets();
std::vector<double> overheadBuckets();

class Metrics {
 public:
  // Content-Type of expose()'s body.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The Prometheus text exposition of every metric, families sorted by name.
  // Takes the registry's locks: call it from the admin listener, not per request.
  std::string expose() const;

  // The in-flight gauge. Prefer the guard; every start needs one finish.
  void requestStarted();
  void requestFinished();
  class InFlight {
   public:
    explicit InFlight(Metrics& m) : metrics_(&m) { m.requestStarted(); }
    InFlight(InFlight&& o) noexcept : metrics_(std::exchange(o.metrics_, nullptr)) {}
    InFlight& operator=(InFlight&&) = delete;
    ~InFlight() {
      if (metrics_) metrics_->requestFinished();
    }

   private:
    Metrics* metrics_;
  };

  // SIGHUP or /admin/reload: counts by outcome; a success also stamps
  // kimi_relay_config_last_reload_success_timestamp_seconds.
  void configReload(ReloadOutcome outcome);

  // For Telemetry (same module).
  detail::Families& families() const { return *families_; }

 private:
  std::unique_ptr<detail::Families> families_;
};

}  // namespace relay::telemetry
