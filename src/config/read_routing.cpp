// routing (the default strategy, exploration, the debug header), region
// labels, and the data-residency check over keys and routes.
#include <algorithm>

#include "relay/config/parse.hpp"
#include "sections.hpp"

namespace relay::config {
namespace detail {

Strategy readStrategy(const Value& v) {
  const std::string s = v.string();
  if (s == "weighted") return Strategy::kWeighted;
  if (s == "least_latency") return Strategy::kLeastLatency;
  if (s == "least_in_flight") return Strategy::kLeastInFlight;
  v.fail("must be weighted, least_latency or least_in_flight; got " + v.echo());
}

std::string readRegion(const Value& v) {
  std::string s = v.string();
  const bool ok = !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
  if (!ok)
    v.fail(v.echo() +
           " is not a region label: use 1 to 64 letters, digits, '.', '_' or '-' (e.g. eu-fra)");
  return s;
}

std::vector<std::string> readRegions(const Value& v) {
  std::vector<std::string> out;
  for (const Value& item : v.list()) {
    std::string r = readRegion(item);
    if (std::find(out.begin(), out.end(), r) != out.end())
      item.fail(item.echo() + " is listed twice");
    out.push_back(std::move(r));
  }
  if (out.empty()) v.fail("must list at least one region (leave the key out for any region)");
  return out;
}

Routing readRouting(const Value& v) {
  Routing r;
  const MapView m = v.map({"strategy", "exploration", "debug_header"});
  m.with("strategy", [&](const Value& x) { r.strategy = readStrategy(x); });
  m.with("exploration", [&](const Value& x) { r.exploration = x.number(0, 0.5); });
  m.with("debug_header", [&](const Value& x) { r.debugHeader = x.boolean(); });
  return r;
}

}  // namespace detail

namespace {

bool listed(const std::vector<std::string>& list, const std::string& item) {
  return list.empty() || std::find(list.begin(), list.end(), item) != list.end();
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items)
    out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::string residencyProblem(const Config& cfg, const Key* key, std::string_view onlyModel) {
  std::vector<std::string> models;
  if (key && !key->models.empty()) {
    models = key->models;
  } else if (!onlyModel.empty()) {
    models.emplace_back(onlyModel);
  } else {
    for (const Upstream& u : cfg.upstreams)
      for (const auto& entry : u.models)
        if (std::find(models.begin(), models.end(), entry.first) == models.end())
          models.push_back(entry.first);
  }
  const std::vector<std::string> none;
  const std::vector<std::string>& keyRegions = key ? key->regions : none;
  for (const std::string& model : models) {
    auto route = cfg.routes.find(model);
    const std::vector<std::string>& routeRegions =
        route != cfg.routes.end() ? route->second.regions : none;
    if (keyRegions.empty() && routeRegions.empty()) continue;
    std::string servers;
    bool any = false;
    for (const Upstream& u : cfg.upstreams) {
      if (!u.models.count(model)) continue;
      const bool ok =
          !u.region.empty() && listed(keyRegions, u.region) && listed(routeRegions, u.region);
      any = any || ok;
      servers += (servers.empty() ? "" : ", ") + u.name + " (" +
                 (u.region.empty() ? "no region" : u.region) + ")";
    }
    if (any) continue;
    std::string rule;
    if (!keyRegions.empty()) rule = "key '" + key->name + "' is kept to " + joined(keyRegions);
    if (!routeRegions.empty())
      rule += std::string(rule.empty() ? "" : " and ") + "model '" + model + "' to " +
              joined(routeRegions);
    return "no upstream may serve model '" + model + "'" + (key ? " for this key" : "") + ": " +
           rule + ", but its upstreams are " + servers +
           "; label an upstream with one of those regions (upstreams[].region), or " +
           (key && key->models.empty() ? "list the models the key may use (keys[].models)"
                                       : "change the regions");
  }
  return {};
}

}  // namespace relay::config
