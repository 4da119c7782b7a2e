// Active health checks: `GET {base_url}/models` on each upstream whose
// `health.active_interval_ms` is set. A success lets an ejected upstream back
// in early (it is the half-open probe, or closes the circuit of one still
// ejected); failures count like a request's. Passive ejection stays the main
// mechanism; this only notices recovery (and silent failure) without traffic.
#pragma once

#include <functional>
#include <memory>

#include "relay/net/exchange.hpp"
#include "relay/pipeline/worker.hpp"

namespace relay::pipeline {

// Runs until the worker's loop stops. `current` returns the snapshot in use
// (a reload changes the upstreams and their intervals).
net::Task<void> runActiveHealthChecks(Worker& worker,
                                      std::function<std::shared_ptr<const Snapshot>()> current);

}  // namespace relay::pipeline
