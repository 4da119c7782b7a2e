// Admin endpoints: health, readiness, metrics and config reload.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "relay/admission/key_registry.hpp"
#include "relay/common/pending.hpp"
#include "relay/net/exchange.hpp"
#include "relay/pipeline/snapshot.hpp"
#include "relay/telemetry/live_stats.hpp"
#include "relay/telemetry/metrics.hpp"

namespace relay::api {

// A change to the runtime keys (POST/PATCH/DELETE /admin/keys...).
struct KeyOp {
  enum class Kind { kCreate, kUpdate, kRevoke, kRotate } kind = Kind::kCreate;
  std::string name;
  std::string body;  // JSON settings (create) or patch (update)
  std::int64_t graceSeconds = 0;
};

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
  // Applies a key change off the event loops; the reply is the API's answer.
  std::function<std::shared_ptr<PendingReply>(KeyOp)> keyChange;
  const admission::KeyRegistry* registry = nullptr;  // what the API changed (for listings)
  // The console (console.hpp): live figures (may be null), what it says about
  // the process.
  const telemetry::LiveStats* live = nullptr;
  std::string version;
  std::chrono::system_clock::time_point startedAt = std::chrono::system_clock::now();
};

// The admin listener's handler: GET /healthz, /readyz, /metrics, the
// console's page (/, /console/...); with the admin key POST /admin/reload,
// /admin/events, the runtime key API (/admin/keys, admin_keys.cpp) and the
// console's data (/admin/console/..., console.hpp). Every answer carries the
// console's security headers (addAdminSecurityHeaders).
net::Handler adminHandler(AdminState& state);

// True when the request carries the admin key (admin.key_sha256), compared in
// constant time. False when no admin key is configured.
bool hasAdminKey(const pipeline::Snapshot& snapshot, const Headers& headers);

// /admin/keys[/{name}[/rotate]] (admin_keys.cpp); the admin key is checked already.
net::Task<void> handleAdminKeys(net::Exchange& exchange, AdminState& state);

// Polls `pending` until it is ready (the work runs on another thread).
net::Task<void> waitReady(const std::function<bool()>& ready);

// Serves the Prometheus exposition.
net::Task<void> serveMetrics(net::Exchange& exchange, const telemetry::Metrics& metrics);

}  // namespace relay::api
