// Per-worker routes to the MCP servers' instances (see McpUpstreams).
#include <random>
#include <stdexcept>

#include "relay/pipeline/mcp.hpp"

namespace relay::pipeline {

McpServerRoute* McpUpstreams::find(std::string_view name) {
  if (servers.empty()) return nullptr;
  if (name.empty()) return &servers.front();
  for (McpServerRoute& s : servers) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::shared_ptr<McpUpstreams> makeMcpUpstreams(const config::Mcp& mcp,
                                               const McpUpstreams* previous) {
  auto out = std::make_shared<McpUpstreams>(mcpSessionSecret(mcp.sessionSecret));
  std::vector<upstream::ClientPool::UpstreamSpec> specs;
  for (std::size_t i = 0; i < mcp.servers.size(); ++i) {
    const config::McpServer& s = mcp.servers[i];
    McpServerRoute route;
    route.index = i;
    route.name = s.name;
    route.region = s.region;
    if (!s.apiKey.empty()) route.authorization = "Bearer " + s.apiKey;
    for (const std::string& url : s.instances) {
      upstream::Target target;
      try {
        target = upstream::parseTarget(url);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("mcp server '" + s.name + "': url " + e.what());
      }
      route.instances.push_back({target, specs.size()});
      specs.push_back(
          {target, s.caFile, s.maxIdleConnections, std::chrono::milliseconds(s.maxIdleMs)});
      // The pool is kept across reloads only for the same URLs and trust anchors.
      out->instanceUrls.push_back(url + "\n" + s.caFile);
    }
    // A random start spreads the first sessions of workers and replicas.
    route.nextInstance = static_cast<std::uint32_t>(std::random_device{}());
    out->servers.push_back(std::move(route));
  }
  if (previous && previous->pool && previous->instanceUrls == out->instanceUrls) {
    out->pool = previous->pool;
    // Changed max_idle_connections / max_idle_ms apply to the pool as it is.
    for (std::size_t i = 0; i < specs.size(); ++i)
      out->pool->setIdleLimits(i, specs[i].maxIdle, specs[i].maxIdleTime);
  } else {
    out->pool = std::make_shared<upstream::ClientPool>(std::move(specs));
    if (previous && previous->pool) previous->pool->retire();  // calls still on it hold it
  }
  if (previous) {
    // Keep the round-robin position of servers that remain, so a reload does
    // not send every worker's next session to instance 0.
    for (McpServerRoute& s : out->servers) {
      for (const McpServerRoute& old : previous->servers) {
        if (old.name == s.name) s.nextInstance = old.nextInstance;
      }
    }
  }
  return out;
}

}  // namespace relay::pipeline
