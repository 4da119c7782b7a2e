// One reader per config section (YAML -> struct), plus the field helpers they
// share. Each reader refuses unknown keys and checks what it can see; checks
// across sections (models named in keys, routes and prices) use a Catalog of
// what the upstreams and MCP servers provide. Private to src/config.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "relay/config/config.hpp"
#include "yaml_reader.hpp"

namespace relay::config::detail {

// What later sections may refer to.
struct Catalog {
  std::set<std::string> models;  // client model ids some upstream serves
  std::map<std::string, std::set<std::string>> modelsByUpstream;
  std::set<std::string> mcpServers;
};

Catalog catalogOf(const std::vector<Upstream>& upstreams, const Mcp& mcp);

Server readServer(const Value& v);
Admin readAdmin(const Value& v, const Server& server);
Log readLog(const Value& v);
MetricsOptions readMetrics(const Value& v);
Timeouts readTimeouts(const Value& v);
Retry readRetry(const Value& v);
Currency readCurrency(const Value& v);
Cluster readCluster(const Value& v);
Routing readRouting(const Value& v);
Strategy readStrategy(const Value& v);
// A region label: 1-64 of [A-Za-z0-9._-] (it becomes a metric label).
std::string readRegion(const Value& v);
// A list of region labels, no repeats, at least one.
std::vector<std::string> readRegions(const Value& v);
// Fills `url` from redis[s]://[[user]:password@]host[:port][/db]; returns why
// the text is refused ("" when accepted), never quoting it.
std::string parseRedisUrl(std::string_view text, RedisUrl& url);

std::vector<Upstream> readUpstreams(const Value& v);
std::map<std::string, Route> readRoutes(const Value& v, const Catalog& catalog);
std::vector<Price> readPrices(const Value& v, const Catalog& catalog);

Mcp readMcp(const Value& v);
std::vector<Key> readKeys(const Value& v, const Catalog& catalog);
Key readKey(const Value& v, const Catalog& catalog);

// Shared field rules.
Endpoint readEndpoint(const Value& v);
// Names of keys, upstreams and MCP servers: 1-64 of [A-Za-z0-9._-] (they end
// up in metric labels and URLs).
std::string readName(const Value& v);
// A model id: non-empty, no whitespace or control characters.
bool isModelId(std::string_view id);
std::string readModelId(const Value& v);
// A string that must not be empty.
std::string readNonEmpty(const Value& v);
// How long an idle keep-alive connection to an upstream or MCP server is
// kept (max_idle_ms): 100 ms to an hour.
std::uint32_t readIdleMs(const Value& v);
// How many idle keep-alive connections a worker keeps per upstream or MCP
// server instance (max_idle_connections): 0 to a million.
std::uint32_t readIdleConnections(const Value& v);
// 64 hex digits, returned lowercase. Never quoted in errors: a raw key pasted
// here by mistake must not leak into a log.
std::string readSha256(const Value& v);

}  // namespace relay::config::detail
