// Everything derived from one loaded config, shared by every worker through a
// shared_ptr. The config-derived parts are immutable; the mutable parts
// (buckets, budgets) are thread-safe objects that a reload carries over to the
// next snapshot for the keys that remain. Exchanges in flight keep the
// snapshot they started with.
#pragma once

#include <memory>
#include <vector>

#include "relay/admission/budget_store.hpp"
#include "relay/admission/key_limiter.hpp"
#include "relay/admission/key_store.hpp"
#include "relay/config/config.hpp"
#include "relay/pipeline/events.hpp"
#include "relay/telemetry/live_stats.hpp"
#include "relay/telemetry/metrics.hpp"
#include "relay/telemetry/telemetry.hpp"
#include "relay/upstream/catalog.hpp"
#include "relay/upstream/retry_planner.hpp"
#include "relay/upstream/upstream_state.hpp"

namespace relay::pipeline {

// Process-wide services that outlive every snapshot.
struct Services {
  telemetry::Metrics* metrics = nullptr;      // required
  telemetry::AccessLog* accessLog = nullptr;  // null: no access log
  EventBus* events = nullptr;                 // null: no event stream
  telemetry::LiveStats* live = nullptr;       // null: no console figures
};

struct Snapshot {
  // Builds the serving state for `cfg`. Limiters of keys whose limits did not
  // change are taken over from `previous`. Throws std::invalid_argument when
  // the config cannot be served (a bad base_url) and admission::BudgetStateError
  // when the budget state file is corrupt.
  Snapshot(config::Config cfg, const Services& services, const Snapshot* previous = nullptr);
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

  const config::Config config;  // first: the members below point into it
  const admission::KeyStore keys;
  const upstream::Catalog catalog;
  // Indexed like keys.tenants() (the config's key order).
  std::vector<std::shared_ptr<admission::KeyLimiter>> limiters;
  std::shared_ptr<admission::BudgetStore> budgets;
  // Health, retry budgets and shaping per upstream (indexed like the catalog).
  std::shared_ptr<upstream::UpstreamStates> upstreamStates;
  const upstream::RetryPlanner planner;
  // Per route (catalog index): the routes of its fallback models, in order.
  std::vector<std::vector<const upstream::ModelRoute*>> fallbacks;
  // Per route: the dearest price any upstream of it or of its fallback models
  // charges, per token kind — what a budget reservation assumes.
  std::vector<telemetry::Price> worstPrices;
  std::shared_ptr<telemetry::Telemetry> telemetry;
  telemetry::Metrics& metrics;
  EventBus* events = nullptr;  // process-wide; may be null (tests, --check-config)

  // Publishes to the event stream when anyone listens (events.hpp).
  void publish(const RelayEvent& event) const {
    if (events && events->active()) events->publish(event);
  }
  bool eventsWanted() const { return events && events->active(); }
};

admission::LimitOptions limitOptionsFor(const config::Key& key);

}  // namespace relay::pipeline
