// Admin endpoints: health, readiness, metrics and config reload.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "relay/common/pending.hpp"
#include "relay/net/exchange.hpp"
#include "relay/pipeline/snapshot.hpp"
#include "relay/telemetry/metrics.hpp"

namespace relay::api {

// Process-wide state the admin endpoints report and act on.
struct AdminState {
  std::atomic<bool> ready{false};  // false before start-up finishes and while draining
  std::atomic<bool> draining{false};
  telemetry::Metrics* metrics = nullptr;
  // The running config (for the admin key) and the reload action: it starts
  // the reload off the event loops and hands back its result to poll ("" =
  // done, else the reason the new config was refused).
  std::function<std::shared_ptr<const pipeline::Snapshot>()> snapshot;
  std::function<std::shared_ptr<PendingText>()> reload;
};

// The admin listener's handler: GET /healthz, /readyz, /metrics; POST /admin/reload
// (admin key).
net::Handler adminHandler(AdminState& state);

// True when the request carries the admin key (admin.key_sha256), compared in
// constant time. False when no admin key is configured.
bool hasAdminKey(const pipeline::Snapshot& snapshot, const Headers& headers);

// Serves the Prometheus exposition.
net::Task<void> serveMetrics(net::Exchange& exchange, const telemetry::Metrics& metrics);

}  // namespace relay::api
