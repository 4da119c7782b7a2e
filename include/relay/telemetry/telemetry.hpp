// Telemetry for one config snapshot: label ids, prices and cached metric
// series over the process-wide Metrics, plus the access log.
//
// A reload builds a new Telemetry next to the new snapshot; requests still in
// flight keep recording through the one they started with. Both count into
// the same Metrics (series are never removed, so cached pointers stay valid).
//
// Every member is thread-safe. The hot path — record() and the event calls —
// takes no lock once a label combination has been seen: a lock-free cache
// lookup, then atomic adds and a few short per-series locks inside
// prometheus-cpp's histograms and summaries.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "relay/config/config.hpp"
#include "relay/telemetry/cost.hpp"
#include "relay/telemetry/labels.hpp"
#include "relay/telemetry/record.hpp"

namespace relay::telemetry {

class AccessLog;
class LiveStats;
class Metrics;

class Telemetry {
 public:
  // `metrics` and `accessLog` must outlive this object; `accessLog` may be
  // null (the access log is off). `nodeIds` are the X-Node-Id values that get
  // their own label. Takes names, prices and the currency from `cfg` — never a
  // secret: no key digest or upstream key is read. Throws
  // std::invalid_argument when the config exceeds LabelSpace's limits.
  // `live` (may be null) gets the console's figures (live_stats.hpp).
  Telemetry(Metrics& metrics, AccessLog* accessLog, const config::Config& cfg,
            std::vector<std::string> nodeIds = {}, LiveStats* live = nullptr);
  ~Telemetry();
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  const LabelSpace& labels() const { return labels_; }
  const PriceTable& prices() const { return prices_; }
  const DisplayCurrency& currency() const { return currency_; }

  // Settles one request, once: computes its cost, counts it in the metrics
  // and writes its access-log line. The returned cost is the one to charge to
  // budgets. Does not throw except std::bad_alloc.
  Settlement record(const RequestRecord& record);

  // Events while a request runs. Upstream ids as in RequestRecord; kNone or an
  // unknown id counts under upstream "none".
  void retry(std::uint32_t upstreamId, UpstreamFailure why);
  void fallback(std::uint32_t fromUpstreamId, FallbackKind kind, UpstreamFailure why);
  void ejection(std::uint32_t upstreamId, EjectionReason why);
  void refusal(RefusalReason why);
  // One upstream attempt ended: `failed` when the upstream is to blame (no
  // answer, 5xx, 429, its credential refused). Feeds the console's error rate.
  void attempt(std::uint32_t upstreamId, bool failed);
  // Sets the health gauge; returns what it said before (for transitions).
  HealthState upstreamHealth(std::uint32_t upstreamId, HealthState state);

  // MCP: one finished HTTP exchange; open/close of a server-to-client stream.
  void recordMcp(const McpRecord& record);
  void mcpStreamOpened(std::uint32_t serverId);
  void mcpStreamClosed(std::uint32_t serverId);

 private:
  struct Series;
  struct McpSeries;
  struct Events;
  struct Caches;

  const Series& seriesFor(const RequestRecord& r);

  Metrics& metrics_;
  AccessLog* log_;
  LiveStats* live_;
  const LabelSpace labels_;
  const PriceTable prices_;
  const DisplayCurrency currency_;
  std::unique_ptr<Events> events_;
  std::unique_ptr<Caches> caches_;
};

}  // namespace relay::telemetry
