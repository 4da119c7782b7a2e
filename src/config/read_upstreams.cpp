// upstreams, routes and prices sections.
#include <algorithm>

#include "sections.hpp"
#include "url.hpp"

namespace relay::config::detail {

namespace {

constexpr std::uint32_t kMaxWeight = 1'000'000;

std::map<std::string, std::string> readModelMap(const Value& v) {
  std::map<std::string, std::string> out;
  if (v.isList()) {  // [a, b]: served under the same id
    for (const Value& item : v.list()) {
      std::string id = readModelId(item);
      if (out.count(id) != 0) item.fail("model " + item.echo() + " is listed twice");
      out.emplace(id, id);
    }
  } else if (v.isMap()) {  // {client_id: upstream_id}
    const MapView m = v.freeMap();
    for (const auto& [clientId, upstreamId] : m.entries()) {
      if (!isModelId(clientId)) {
        m.failAtKey(clientId, "a model id must be non-empty, without spaces or control characters");
      }
      out.emplace(clientId, readModelId(upstreamId));
    }
  } else if (!v.isNull()) {
    v.fail("must be a map {client_model_id: upstream_model_id} or a list of model ids");
  }
  if (out.empty()) v.fail("must name at least one model this upstream serves");
  return out;
}

Health readHealth(const Value& v) {
  Health h;
  const MapView m =
      v.map({"eject_after_failures", "base_ejection_ms", "max_ejection_ms", "active_interval_ms"});
  m.with("eject_after_failures",
         [&](const Value& x) { h.ejectAfterFailures = x.unsignedInt<std::uint32_t>(0); });
  m.with("base_ejection_ms",
         [&](const Value& x) { h.baseEjectionMs = x.unsignedInt<std::uint32_t>(1); });
  m.with("max_ejection_ms",
         [&](const Value& x) { h.maxEjectionMs = x.unsignedInt<std::uint32_t>(1); });
  m.with("active_interval_ms",
         [&](const Value& x) { h.activeIntervalMs = x.unsignedInt<std::uint32_t>(0); });
  if (h.maxEjectionMs < h.baseEjectionMs) {
    if (const auto max = m.find("max_ejection_ms")) {
      max->fail("must be >= base_ejection_ms (" + std::to_string(h.baseEjectionMs) + ")");
    }
    m.find("base_ejection_ms")
        ->fail("must be <= max_ejection_ms (" + std::to_string(h.maxEjectionMs) + " when not set)");
  }
  return h;
}

Upstream readUpstream(const Value& v) {
  Upstream u;
  const MapView m =
      v.map({"name", "base_url", "api_key", "weight", "models", "allow_insecure_http", "ca_file",
             "max_concurrency", "rpm", "max_response_bytes", "max_event_bytes",
             "max_idle_connections", "max_idle_ms", "health", "region"});
  u.name = readName(m.require("name"));
  m.with("allow_insecure_http", [&](const Value& x) { u.allowInsecureHttp = x.boolean(); });

  const Value base = m.require("base_url");
  const UrlCheck url = parseHttpUrl(base.string());
  if (!url.error.empty()) base.fail(url.error);
  if (!url.url.isHttps() && !u.allowInsecureHttp) {
    base.fail(
        "plain http:// is refused: the upstream key and the prompts would cross the network "
        "unencrypted; use https://, or set allow_insecure_http: true on this upstream (e.g. for a "
        "local mock)");
  }
  u.baseUrl = url.url.text();
  while (!u.baseUrl.empty() && u.baseUrl.back() == '/')
    u.baseUrl.pop_back();

  m.with("api_key", [&](const Value& x) { u.apiKey = x.secret(); });
  m.with("weight", [&](const Value& x) { u.weight = x.unsignedInt<std::uint32_t>(1, kMaxWeight); });
  u.models = readModelMap(m.require("models"));
  m.with("ca_file", [&](const Value& x) { u.caFile = readNonEmpty(x); });
  m.with("max_concurrency",
         [&](const Value& x) { u.maxConcurrency = x.unsignedInt<std::uint32_t>(0); });
  m.with("rpm", [&](const Value& x) { u.rpm = x.unsignedInt<std::uint32_t>(0); });
  m.with("max_response_bytes",
         [&](const Value& x) { u.maxResponseBytes = x.unsignedInt<std::uint64_t>(1024); });
  m.with("max_event_bytes",
         [&](const Value& x) { u.maxEventBytes = x.unsignedInt<std::uint64_t>(1024, 1ull << 30); });
  m.with("max_idle_connections",
         [&](const Value& x) { u.maxIdleConnections = readIdleConnections(x); });
  m.with("max_idle_ms", [&](const Value& x) { u.maxIdleMs = readIdleMs(x); });
  m.with("health", [&](const Value& x) { u.health = readHealth(x); });
  m.with("region", [&](const Value& x) { u.region = readRegion(x); });
  return u;
}

}  // namespace

std::vector<Upstream> readUpstreams(const Value& v) {
  std::vector<Upstream> out;
  std::map<std::string, int> lines;  // name -> line (1-based) of its first definition
  for (const Value& item : v.list()) {
    Upstream u = readUpstream(item);
    if (auto it = lines.find(u.name); it != lines.end()) {
      const MapView m = item.freeMap();
      m.failAtKey("name", "upstream name " + m.require("name").echo() +
                              " is already used at line " + std::to_string(it->second));
    }
    lines.emplace(u.name, item.mark().line + 1);
    out.push_back(std::move(u));
  }
  return out;
}

std::map<std::string, Route> readRoutes(const Value& v, const Catalog& catalog) {
  std::map<std::string, Route> out;
  const MapView m = v.freeMap();
  for (const auto& entry : m.entries()) {
    const std::string& model = entry.first;  // named, not bound: the lambda below uses it
    if (catalog.models.count(model) == 0) {
      m.failAtKey(model, "no upstream serves model '" + model +
                             "' (routes are keyed by a model id listed under some upstream's "
                             "models)");
    }
    Route r;
    const MapView rm = entry.second.map({"fallback_models", "strategy", "regions"});
    rm.with("strategy", [&](const Value& x) { r.strategy = readStrategy(x); });
    rm.with("regions", [&](const Value& x) { r.regions = readRegions(x); });
    rm.with("fallback_models", [&](const Value& x) {
      for (const Value& item : x.list()) {
        std::string fallback = readModelId(item);
        if (catalog.models.count(fallback) == 0) {
          item.fail("no upstream serves model " + item.echo());
        }
        if (fallback == model) item.fail("a model cannot be its own fallback");
        if (std::find(r.fallbackModels.begin(), r.fallbackModels.end(), fallback) !=
            r.fallbackModels.end()) {
          item.fail(item.echo() + " is listed twice");
        }
        r.fallbackModels.push_back(std::move(fallback));
      }
    });
    out.emplace(model, std::move(r));
  }
  return out;
}

std::vector<Price> readPrices(const Value& v, const Catalog& catalog) {
  std::vector<Price> out;
  for (const Value& item : v.list()) {
    const MapView m = item.map({"model", "upstream", "input", "cached_input", "output"});
    Price p;
    const Value model = m.require("model");
    p.model = readModelId(model);
    if (catalog.models.count(p.model) == 0) {
      model.fail("no upstream serves model " + model.echo());
    }
    m.with("upstream", [&](const Value& x) {
      p.upstream = readName(x);
      const auto it = catalog.modelsByUpstream.find(p.upstream);
      if (it == catalog.modelsByUpstream.end()) x.fail("no upstream is named " + x.echo());
      if (it->second.count(p.model) == 0) {
        x.fail("upstream " + x.echo() + " does not serve model " + model.echo());
      }
    });
    p.input = m.require("input").number(0);
    p.output = m.require("output").number(0);
    p.cachedInput = p.input;  // cached prompt tokens cost the same unless said otherwise
    m.with("cached_input", [&](const Value& x) { p.cachedInput = x.number(0); });
    for (const Price& other : out) {
      if (other.model == p.model && other.upstream == p.upstream) {
        const auto upstream = m.find("upstream");
        item.fail("model " + model.echo() +
                  (upstream ? " on upstream " + upstream->echo() : std::string()) +
                  " already has a price");
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace relay::config::detail
