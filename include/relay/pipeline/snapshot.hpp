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
#include "relay/upstream/catalog.hpp"

namespace relay::pipeline {

struct Snapshot {
  // Builds the serving state for `cfg`. Limiters of keys whose limits did not
  // change are taken over from `previous`. Throws std::invalid_argument when
  // the config cannot be served (a bad base_url) and admission::BudgetStateError
  // when the budget state file is corrupt.
  explicit Snapshot(config::Config cfg, const Snapshot* previous = nullptr);
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

  const config::Config config;  // first: the members below point into it
  const admission::KeyStore keys;
  const upstream::Catalog catalog;
  // Indexed like keys.tenants() (the config's key order).
  std::vector<std::shared_ptr<admission::KeyLimiter>> limiters;
  std::shared_ptr<admission::BudgetStore> budgets;
};

admission::LimitOptions limitOptionsFor(const config::Key& key);

}  // namespace relay::pipeline
