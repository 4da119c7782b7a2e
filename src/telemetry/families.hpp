// The metric families behind telemetry::Metrics (internal to the module).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "histogram.hpp"
#include "relay/telemetry/record.hpp"
#include "window_quantiles.hpp"

namespace relay::telemetry::detail {

// A counter family whose series hold integer pico-USD. prometheus::Counter
// adds doubles, whose rounding would drift per request; here each request
// adds an exact integer (one fetch_add, no CAS loop) and the scrape prints the
// exact decimal (a double printed to 16 digits would show 0.000524 as
// 0.0005240000000000001). It is serialised by Metrics::expose() itself, in
// the text format, between the registry's families.
class ExactUsdCounter {
 public:
  ExactUsdCounter(std::string name, std::string help)
      : name_(std::move(name)), help_(std::move(help)) {}

  // The cell of `labels`, created on first use. The address is stable for the
  // family's lifetime (cells are never removed).
  std::atomic<std::uint64_t>& add(const prometheus::Labels& labels);
  const std::string& name() const { return name_; }
  // Appends the family in the text exposition format 0.0.4.
  void serialize(std::string& out) const;

 private:
  struct Cell {
    prometheus::Labels labels;
    std::atomic<std::uint64_t> picoUsd{0};
  };
  const std::string name_, help_;
  mutable std::mutex mutex_;
  std::deque<Cell> cells_;  // deque: push_back never moves existing cells
  std::map<prometheus::Labels, Cell*> byLabels_;
};

struct Families {
  Families();

  prometheus::Registry registry;
  const std::vector<double> latency;
  const std::vector<double> overhead;

  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Counter>& tokens;
  prometheus::Family<prometheus::Counter>& tokensEstimated;
  prometheus::Family<prometheus::Counter>& unpriced;
  ExactUsdCounter cost;

  HistogramFamily duration;
  HistogramFamily ttft;
  HistogramFamily upstreamLatency;
  WindowSummaryFamily durationWindow;
  WindowSummaryFamily ttftWindow;
  HistogramFamily overheadFamily;
  LatencyHistogram& overheadSeconds;

  prometheus::Family<prometheus::Counter>& retries;
  prometheus::Family<prometheus::Counter>& fallbacks;
  prometheus::Family<prometheus::Counter>& ejections;
  prometheus::Family<prometheus::Gauge>& health;
  std::array<prometheus::Counter*, static_cast<std::size_t>(RefusalReason::kCount)> refusals{};

  prometheus::Gauge& inFlight;
  std::array<prometheus::Counter*, static_cast<std::size_t>(ReloadOutcome::kCount)> reloads{};
  prometheus::Gauge& lastReload;

  prometheus::Family<prometheus::Counter>& mcpRequests;
  HistogramFamily mcpDuration;
  prometheus::Family<prometheus::Gauge>& mcpStreams;
};

// Label values of the fixed sets (record.hpp enums).
std::string_view failureLabel(UpstreamFailure f);
std::string_view fallbackKindLabel(FallbackKind k);
std::string_view ejectionLabel(EjectionReason r);
std::string_view refusalLabel(RefusalReason r);

}  // namespace relay::telemetry::detail
