// Method + path -> endpoint, for the main and the admin listeners.
#pragma once

#include <atomic>

#include "relay/net/exchange.hpp"
#include "relay/pipeline/worker.hpp"
#include "relay/telemetry/metrics.hpp"

namespace relay::api {

// The main listener's handler on one worker: /v1/chat/completions, /v1/models.
net::Handler mainHandler(pipeline::Worker& worker);

// Process-wide state the admin endpoints report.
struct AdminState {
  std::atomic<bool> ready{false};     // false before start-up finishes and while draining
  std::atomic<bool> draining{false};
  telemetry::Metrics* metrics = nullptr;
};

// The admin listener's handler: /healthz, /readyz, /metrics.
net::Handler adminHandler(AdminState& state);

}  // namespace relay::api
