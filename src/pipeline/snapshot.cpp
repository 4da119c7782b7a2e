#include "relay/pipeline/snapshot.hpp"

#include <algorithm>

#include "relay/admission/clock.hpp"
#include "relay/upstream/resilience_config.hpp"

namespace relay::pipeline {

admission::LimitOptions limitOptionsFor(const config::Key& key) {
  admission::LimitOptions o;
  o.rpm = key.limits.rpm;
  o.rpmBurst = key.limits.rpmBurst;
  o.tpm = key.limits.tpm;
  o.tpmBurst = key.limits.tpmBurst;
  o.concurrency = key.limits.concurrency;
  return o;
}

namespace {

bool sameLimits(const admission::LimitOptions& a, const admission::LimitOptions& b) {
  return a.rpm == b.rpm && a.rpmBurst == b.rpmBurst && a.tpm == b.tpm && a.tpmBurst == b.tpmBurst &&
         a.concurrency == b.concurrency;
}

admission::BudgetOptions budgetOptionsFor(const config::Key& key) {
  admission::BudgetOptions o;
  if (!key.budget) return o;  // spend is still tracked, without caps
  o.usd = key.budget->usd;
  o.maxInputTokens = key.budget->maxInputTokens;
  o.maxOutputTokens = key.budget->maxOutputTokens;
  switch (key.budget->period) {
    case config::BudgetPeriod::kDay:
      o.period = admission::BudgetPeriod::kDay;
      break;
    case config::BudgetPeriod::kMonth:
      o.period = admission::BudgetPeriod::kMonth;
      break;
    case config::BudgetPeriod::kTotal:
      o.period = admission::BudgetPeriod::kTotal;
      break;
  }
  return o;
}

}  // namespace

Snapshot::Snapshot(config::Config cfg, const Services& services, const Snapshot* previous)
    : config(std::move(cfg)),
      keys(config.keys),
      catalog(config.upstreams),
      planner(upstream::retryOptions(config.retry)),
      metrics(*services.metrics),
      events(services.events) {
  for (const config::Key& key : config.keys) {
    admission::LimitOptions options = limitOptionsFor(key);
    std::shared_ptr<admission::KeyLimiter> limiter;
    if (previous) {
      for (std::size_t i = 0; i < previous->config.keys.size(); ++i) {
        const config::Key& old = previous->config.keys[i];
        if (old.name == key.name && sameLimits(limitOptionsFor(old), options)) {
          limiter = previous->limiters[i];  // keeps its buckets and in-flight count
          break;
        }
      }
    }
    if (!limiter) limiter = std::make_shared<admission::KeyLimiter>(key.name, options);
    limiters.push_back(std::move(limiter));
  }

  std::vector<admission::BudgetKey> budgetKeys;
  for (const config::Key& key : config.keys)
    budgetKeys.push_back({key.name, budgetOptionsFor(key)});
  auto now = admission::SystemClock::instance().wallNow();
  if (previous) {
    // Spend carries over in memory (the same Budget objects where nothing
    // changed), so requests still settling against the old snapshot count.
    budgets = std::make_shared<admission::BudgetStore>(budgetKeys, config.stateDir, now,
                                                       *previous->budgets);
  } else {
    budgets = std::make_shared<admission::BudgetStore>(budgetKeys, config.stateDir, now);
    budgets->load(now);
  }

  std::vector<upstream::UpstreamOptions> upstreamOpts = upstream::upstreamOptions(config);
  if (previous) {
    auto names = [](const config::Config& c) {
      std::vector<std::string> n;
      for (const auto& u : c.upstreams)
        n.push_back(u.name);
      return n;
    };
    upstreamStates = std::make_shared<upstream::UpstreamStates>(
        upstreamOpts, names(config), *previous->upstreamStates, names(previous->config));
  } else {
    upstreamStates = std::make_shared<upstream::UpstreamStates>(upstreamOpts);
  }
  for (const upstream::ModelRoute& route : catalog.routes()) {
    std::vector<const upstream::ModelRoute*> chain;
    auto it = config.routes.find(route.model);
    if (it != config.routes.end()) {
      for (const std::string& model : it->second.fallbackModels) {
        if (const upstream::ModelRoute* r = catalog.route(model); r && r != &route)
          chain.push_back(r);
      }
    }
    fallbacks.push_back(std::move(chain));
  }
  telemetry = std::make_shared<telemetry::Telemetry>(metrics, services.accessLog, config,
                                                     config.metrics.nodeIds, services.live);
  for (const upstream::ModelRoute& route : catalog.routes()) {
    telemetry::Price worst;
    auto consider = [&](const upstream::ModelRoute& r) {
      for (const upstream::Candidate& c : r.candidates) {
        const telemetry::Price* p =
            telemetry->prices().find(r.model, catalog.upstreams()[c.upstream].name);
        if (!p) continue;
        worst.inputMicroUsd = std::max(worst.inputMicroUsd, p->inputMicroUsd);
        worst.cachedInputMicroUsd = std::max(worst.cachedInputMicroUsd, p->cachedInputMicroUsd);
        worst.outputMicroUsd = std::max(worst.outputMicroUsd, p->outputMicroUsd);
      }
    };
    consider(route);
    for (const upstream::ModelRoute* fb : fallbacks[route.index])
      consider(*fb);
    worstPrices.push_back(worst);
  }
}

}  // namespace relay::pipeline
