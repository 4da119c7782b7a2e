// Live figures for the operator console (api/console.cpp): what one process
// did in the last minute and hour, per key, upstream and swarm node, and a
// ring of 10-second samples of the last hour for its plots. Prometheus has
// the same facts as counters and histograms; this answers "what is my swarm
// doing right now" without a Prometheus.
//
// Process-wide (pipeline::Services), so figures carry across config reloads
// by name. Fed by Telemetry: the cells a request touches are resolved once per
// label combination (under a mutex) and cached in Telemetry's series, so the
// hot path is a handful of relaxed atomic adds.
//
// Bounds (docs/operations.md, Console): at most kMaxKeys keys, kMaxUpstreams
// upstreams and kMaxNodes node labels get cells (names past the cap are not
// tracked; node labels are bounded by metrics.node_ids anyway); the history
// holds kHistoryPoints samples. Cells are never freed: a process holds at
// most those, about 38 KiB per upstream, 36 KiB per node (two quantile
// windows each) and 1.4 KiB per key.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "relay/telemetry/cost.hpp"
#include "relay/telemetry/record.hpp"

namespace relay::telemetry {

namespace detail {
struct LiveKey;
struct LiveUpstream;
struct LiveNode;
}  // namespace detail

// The cells one label combination counts into; null = not tracked.
struct LiveCells {
  detail::LiveKey* key = nullptr;
  detail::LiveUpstream* upstream = nullptr;
  detail::LiveNode* node = nullptr;
};

// Milliseconds; NaN when the window is empty.
struct Percentiles {
  double p50 = 0, p95 = 0, p99 = 0;
};

struct KeyLive {
  std::uint64_t requestsLastMinute = 0;
  std::uint64_t tokensLastMinute = 0;  // prompt + completion, as settled
  std::uint64_t requestsTotal = 0;     // since the process started
};

struct UpstreamLive {
  Percentiles latency, ttft;  // requests it answered, over the last minute
  std::uint64_t requestsLastMinute = 0;
  std::uint64_t attemptsLastMinute = 0;
  std::uint64_t failedAttemptsLastMinute = 0;  // transport failures, 5xx, 429, refused credential
  std::uint64_t requestsTotal = 0;
  Cost costLastHour, costTotal;
};

struct NodeLive {
  std::string node;  // the bounded X-Node-Id label ("none", "other" or a configured id)
  Percentiles latency, ttft;
  std::uint64_t requestsLastMinute = 0;
  std::uint64_t requestsTotal = 0;
};

// One sample of the whole process. Counts and spend are cumulative since the
// start, so a plot of any span is the difference of two points.
struct HistoryPoint {
  std::int64_t unixMs = 0;
  Percentiles latency, ttft;  // over the minute before the sample
  std::uint64_t requests = 0;
  std::uint64_t errors = 0;  // answered 5xx, or not answered at all
  Cost spend;
};

class LiveStats {
 public:
  static constexpr std::size_t kMaxKeys = 4096;
  static constexpr std::size_t kMaxUpstreams = 1024;
  static constexpr std::size_t kMaxNodes = 256;
  static constexpr std::size_t kHistoryPoints = 360;
  static constexpr std::int64_t kSampleMs = 10'000;  // 360 x 10 s = one hour

  LiveStats();
  ~LiveStats();
  LiveStats(const LiveStats&) = delete;
  LiveStats& operator=(const LiveStats&) = delete;

  // Cells by name, created on first use (takes the mutex: call once per
  // label combination, not per request). Empty names give no cell.
  LiveCells cells(std::string_view key, std::string_view upstream, std::string_view node);
  detail::LiveUpstream* upstreamCell(std::string_view name);

  // The clock every `nowMs` below is read from: milliseconds of
  // CLOCK_MONOTONIC_COARSE (cheap; 1-4 ms resolution).
  static std::int64_t steadyNowMs();

  // The hot path: lock-free.
  void record(const LiveCells& cells, const RequestRecord& r, const Cost& cost, std::int64_t nowMs);
  // One upstream attempt's outcome (for the error rate).
  void attempt(detail::LiveUpstream* upstream, bool failed, std::int64_t nowMs);

  // Readers (the admin listener). Names never seen read as zeros.
  KeyLive key(std::string_view name, std::int64_t nowMs) const;
  UpstreamLive upstream(std::string_view name, std::int64_t nowMs) const;
  std::vector<NodeLive> nodes(std::int64_t nowMs) const;

  // Appends a point to the history ring when kSampleMs passed since the last
  // one (the gateway calls it every few seconds, off the event loops).
  void sampleIfDue(std::int64_t unixMs, std::int64_t nowMs);
  // Oldest first; at most kHistoryPoints.
  std::vector<HistoryPoint> history() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace relay::telemetry
