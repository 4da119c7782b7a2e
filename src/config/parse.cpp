// parseConfig / loadConfigFile: the document, its top-level keys, and the
// order in which sections are read (those that others refer to come first).
#include "relay/config/parse.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "relay/common/headers.hpp"
#include "sections.hpp"
#include "yaml_document.hpp"
#include "yaml_reader.hpp"

namespace relay::config {

namespace {

using detail::MapView;
using detail::Value;

// Residency: every model a key may use keeps at least one upstream it may
// use. The error points at the rule that leaves none.
void checkResidency(const MapView& top, const Config& c) {
  for (const auto& [model, route] : c.routes) {
    if (std::string why = residencyProblem(c, nullptr, model); !why.empty())
      top.find("routes")
          ->freeMap()
          .find(model)
          ->map({"fallback_models", "strategy", "regions"})
          .require("regions")
          .fail(why);
  }
  for (std::size_t i = 0; i < c.keys.size(); ++i) {
    if (std::string why = residencyProblem(c, &c.keys[i]); !why.empty()) {
      const std::vector<Value> items = top.find("keys")->list();
      const MapView km = items[i].map(
          {"name", "sha256", "models", "limits", "budget", "mcp_servers", "mcp_tools", "regions"});
      (km.find("regions") ? *km.find("regions") : items[i]).fail(why);
    }
  }
}

// forward_headers: header names (or prefixes ending in '*') of the caller's
// that go upstream; never one that carries a credential or is the gateway's.
std::vector<std::string> readForwardHeaders(const Value& v) {
  std::vector<std::string> out;
  for (const Value& item : v.list()) {
    std::string name = toLower(item.string());
    std::string_view stem = name;
    if (!stem.empty() && stem.back() == '*') stem.remove_suffix(1);
    bool token = !stem.empty() && std::all_of(stem.begin(), stem.end(), [](char ch) {
      return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
    });
    if (!token) item.fail("must be a header name, or a prefix ending in '*' such as x-team-*");
    if (name == "authorization" || name == "x-api-key" || name == "cookie" ||
        name == "proxy-authorization" || name == "host" || name.starts_with("x-relay-") ||
        name == "*") {
      item.fail("'" + name +
                "' may never be forwarded: it carries the caller's credentials "
                "or belongs to the gateway");
    }
    out.push_back(std::move(name));
  }
  return out;
}

Config readDocument(const Value& root, const std::string& sourceName) {
  if (!root.isMap()) {
    root.fail("the top level must be a map of sections (server:, upstreams:, ...)");
  }
  const MapView top =
      root.map({"server", "admin", "keys", "upstreams", "retry", "timeouts", "routes", "prices",
                "currency", "mcp", "default_max_tokens", "state_dir", "log", "metrics",
                "forward_headers", "cluster", "routing"});
  Config c;
  c.sourcePath = sourceName;

  const std::optional<Value> server = top.find("server");
  if (!server) {
    root.fail(
        "missing required key 'server' (it needs at least one listener: server.listen or "
        "server.tls_listen)");
  }
  c.server = detail::readServer(*server);
  top.with("admin", [&](const Value& v) { c.admin = detail::readAdmin(v, c.server); });
  if (c.server.metricsOnMain && c.admin.keySha256.empty()) {
    server->freeMap()
        .require("metrics_on_main")
        .fail("needs admin.key_sha256: /metrics on the main port is served only to the admin key");
  }

  // Sections that others refer to: MCP servers and upstreams (their models).
  top.with("mcp", [&](const Value& v) { c.mcp = detail::readMcp(v); });
  top.with("upstreams", [&](const Value& v) { c.upstreams = detail::readUpstreams(v); });
  if (c.upstreams.empty() && c.mcp.servers.empty()) {
    if (const std::optional<Value> ups = top.find("upstreams")) {
      ups->fail("must list at least one upstream (or configure mcp.servers)");
    }
    root.fail("missing required key 'upstreams' (or mcp.servers): nothing to relay to");
  }
  const detail::Catalog catalog = detail::catalogOf(c.upstreams, c.mcp);

  top.with("routes", [&](const Value& v) { c.routes = detail::readRoutes(v, catalog); });
  top.with("prices", [&](const Value& v) { c.prices = detail::readPrices(v, catalog); });
  top.with("keys", [&](const Value& v) { c.keys = detail::readKeys(v, catalog); });
  top.with("retry", [&](const Value& v) { c.retry = detail::readRetry(v); });
  top.with("timeouts", [&](const Value& v) { c.timeouts = detail::readTimeouts(v); });
  top.with("currency", [&](const Value& v) { c.currency = detail::readCurrency(v); });
  top.with("log", [&](const Value& v) { c.log = detail::readLog(v); });
  top.with("metrics", [&](const Value& v) { c.metrics = detail::readMetrics(v); });
  top.with("cluster", [&](const Value& v) { c.cluster = detail::readCluster(v); });
  top.with("routing", [&](const Value& v) { c.routing = detail::readRouting(v); });
  checkResidency(top, c);
  top.with("default_max_tokens",
           [&](const Value& v) { c.defaultMaxTokens = v.unsignedInt<std::uint64_t>(1); });
  top.with("state_dir", [&](const Value& v) { c.stateDir = v.string(); });
  top.with("forward_headers", [&](const Value& v) { c.forwardHeaders = readForwardHeaders(v); });
  return c;
}

}  // namespace

Config parseConfig(std::string_view yamlText, const std::string& sourceName, const EnvLookup& env) {
  const detail::Source source{sourceName, &env};
  const YAML::Node document = detail::loadSingleDocument(yamlText, source);
  const Value root(source, document, "", document.Mark());
  try {
    return readDocument(root, sourceName);
  } catch (const YAML::Exception& e) {  // a yaml-cpp surprise: still name the place
    detail::throwAt(source, e.mark, "", "unexpected YAML error: " + e.msg);
  }
}

Config loadConfigFile(const std::string& path, const EnvLookup& env) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw ConfigError(path + ": is a directory, not a config file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(path + ": cannot read: " + std::strerror(errno));
  return parseConfig(text.str(), path, env);
}

}  // namespace relay::config
