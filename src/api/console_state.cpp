#include "console_state.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "key_view.hpp"
#include "relay/admission/budget_period.hpp"
#include "relay/admission/clock.hpp"
#include "relay/api/console.hpp"
#include "relay/upstream/health.hpp"

namespace relay::api {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;

// NaN (an empty window) becomes null in the JSON.
json ms(double v) {
  return std::isfinite(v) ? json(std::round(v * 1000) / 1000) : json(nullptr);
}

json percentiles(const telemetry::Percentiles& p) {
  return {{"p50", ms(p.p50)}, {"p95", ms(p.p95)}, {"p99", ms(p.p99)}};
}

std::string isoMs(SystemClock::time_point t) {
  std::string out = admission::formatUtc(t);
  // formatUtc writes whole seconds ("...:05Z"): add the milliseconds.
  auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  if (!out.empty() && out.back() == 'Z') {
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03lldZ", static_cast<long long>(millis));
    out.pop_back();
    out += frac;
  }
  return out;
}

json keysJson(const AdminState& state, const pipeline::Snapshot& snap, std::int64_t nowMs,
              std::size_t& total) {
  json keys = json::array();
  const auto& tenants = snap.keys.tenants();
  total = tenants.size();
  for (const admission::Tenant& t : tenants) {
    if (keys.size() >= kConsoleMaxKeys) break;
    json k = describeKey(snap, t, state.registry);
    telemetry::KeyLive live = state.live ? state.live->key(t.name, nowMs) : telemetry::KeyLive{};
    k["last_minute"] = {{"requests", live.requestsLastMinute}, {"tokens", live.tokensLastMinute}};
    k["requests_total"] = live.requestsTotal;
    keys.push_back(std::move(k));
  }
  if (state.registry) {
    for (const std::string& revoked : state.registry->revokedFileKeys()) {
      ++total;
      if (keys.size() >= kConsoleMaxKeys) continue;
      keys.push_back({{"name", revoked}, {"source", "file"}, {"revoked", true}});
    }
  }
  return keys;
}

json healthJson(const upstream::HealthTracker& h, const config::Health& cfg,
                SteadyClock::time_point now, SystemClock::time_point wallNow) {
  json out;
  switch (h.status(now)) {
    case upstream::HealthStatus::kHealthy:
      out["state"] = "healthy";
      break;
    case upstream::HealthStatus::kEjected:
      out["state"] = "ejected";
      break;
    case upstream::HealthStatus::kHalfOpen:
      out["state"] = "probing";  // the ejection is over: the next request decides
      break;
  }
  out["ejected_until"] = nullptr;
  if (auto until = h.ejectedUntil(now)) {
    out["ejected_until"] =
        isoMs(wallNow + std::chrono::duration_cast<SystemClock::duration>(*until - now));
  }
  out["consecutive_failures"] = h.consecutiveFailures();
  out["ejections_total"] = h.ejectionsTotal();
  out["eject_after_failures"] = cfg.ejectAfterFailures;
  return out;
}

json upstreamsJson(const AdminState& state, const pipeline::Snapshot& snap, std::int64_t nowMs) {
  const auto now = SteadyClock::now();
  const auto wallNow = SystemClock::now();
  json out = json::array();
  const auto& upstreams = snap.catalog.upstreams();
  for (std::size_t i = 0; i < upstreams.size(); ++i) {
    const upstream::UpstreamInfo& info = upstreams[i];
    const config::Upstream& cfg = *info.config;
    const upstream::UpstreamState& st = (*snap.upstreamStates)[i];
    json models = json::array();
    for (const auto& [client, _] : cfg.models)
      models.push_back(client);
    json u = {{"name", info.name},
              {"region", cfg.region.empty() ? json(nullptr) : json(cfg.region)},
              {"weight", cfg.weight},
              {"models", models},
              {"max_concurrency", cfg.maxConcurrency},
              {"rpm", cfg.rpm},
              {"in_flight", st.concurrency().inFlight()},
              {"health", healthJson(st.health(), cfg.health, now, wallNow)}};
    telemetry::UpstreamLive live;
    if (state.live) {
      live = state.live->upstream(info.name, nowMs);
    } else {
      const double nan = std::nan("");
      live.latency = live.ttft = telemetry::Percentiles{nan, nan, nan};
    }
    u["latency_ms"] = percentiles(live.latency);
    u["ttft_ms"] = percentiles(live.ttft);
    u["last_minute"] = {
        {"requests", live.requestsLastMinute},
        {"attempts", live.attemptsLastMinute},
        {"failed_attempts", live.failedAttemptsLastMinute},
        {"error_rate", live.attemptsLastMinute == 0
                           ? json(nullptr)
                           : json(static_cast<double>(live.failedAttemptsLastMinute) /
                                  static_cast<double>(live.attemptsLastMinute))}};
    u["requests_total"] = live.requestsTotal;
    u["cost_usd_last_hour"] = live.costLastHour.usd();
    u["cost_usd_total"] = live.costTotal.usd();
    out.push_back(std::move(u));
  }
  return out;
}

json nodesJson(const AdminState& state, std::int64_t nowMs) {
  json out = json::array();
  if (!state.live) return out;
  for (const telemetry::NodeLive& n : state.live->nodes(nowMs)) {
    out.push_back({{"node", n.node},
                   {"latency_ms", percentiles(n.latency)},
                   {"ttft_ms", percentiles(n.ttft)},
                   {"requests_last_minute", n.requestsLastMinute},
                   {"requests_total", n.requestsTotal}});
  }
  return out;
}

}  // namespace

std::string consoleStateJson(const AdminState& state) {
  std::shared_ptr<const pipeline::Snapshot> snap = state.snapshot();
  const std::int64_t nowMs = telemetry::LiveStats::steadyNowMs();
  const auto wallNow = SystemClock::now();
  std::size_t keysTotal = 0;
  json keys = keysJson(state, *snap, nowMs, keysTotal);
  json out = {{"object", "console.state"},
              {"time", isoMs(wallNow)},
              {"version", state.version},
              {"started_at", isoMs(state.startedAt)},
              {"draining", state.draining.load()},
              {"keys_total", keysTotal},
              {"keys", std::move(keys)},
              {"upstreams", upstreamsJson(state, *snap, nowMs)},
              {"nodes", nodesJson(state, nowMs)},
              {"node_ids", snap->config.metrics.nodeIds},
              {"models", json::array()},
              {"bounds",
               {{"keys_listed", kConsoleMaxKeys},
                {"history_points", telemetry::LiveStats::kHistoryPoints},
                {"history_interval_seconds", telemetry::LiveStats::kSampleMs / 1000},
                {"tracked_keys", telemetry::LiveStats::kMaxKeys},
                {"tracked_upstreams", telemetry::LiveStats::kMaxUpstreams},
                {"tracked_nodes", telemetry::LiveStats::kMaxNodes}}}};
  for (const upstream::ModelRoute& r : snap->catalog.routes())
    out["models"].push_back(r.model);
  return out.dump();
}

std::string consoleHistoryJson(const AdminState& state) {
  std::vector<telemetry::HistoryPoint> points;
  if (state.live) points = state.live->history();
  json t = json::array(), requests = json::array(), errors = json::array(), spend = json::array();
  json lat = {{"p50", json::array()}, {"p95", json::array()}, {"p99", json::array()}};
  json ttft = lat;
  for (const telemetry::HistoryPoint& p : points) {
    t.push_back(p.unixMs);
    requests.push_back(p.requests);
    errors.push_back(p.errors);
    spend.push_back(p.spend.usd());
    lat["p50"].push_back(ms(p.latency.p50));
    lat["p95"].push_back(ms(p.latency.p95));
    lat["p99"].push_back(ms(p.latency.p99));
    ttft["p50"].push_back(ms(p.ttft.p50));
    ttft["p95"].push_back(ms(p.ttft.p95));
    ttft["p99"].push_back(ms(p.ttft.p99));
  }
  json out = {{"object", "console.history"},
              {"interval_seconds", telemetry::LiveStats::kSampleMs / 1000},
              {"capacity", telemetry::LiveStats::kHistoryPoints},
              {"t", std::move(t)},
              {"latency_ms", std::move(lat)},
              {"ttft_ms", std::move(ttft)},
              {"requests", std::move(requests)},
              {"errors", std::move(errors)},
              {"spend_usd", std::move(spend)}};
  return out.dump();
}

}  // namespace relay::api
