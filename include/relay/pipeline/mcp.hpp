// The MCP relay at /v1/mcp[/{server}]: MCP Streamable HTTP (POST, GET, DELETE)
// in front of the servers of `mcp.servers`, with the caller authenticated by
// its gateway key, the server's own credential injected, and sessions pinned
// to the instance that issued them (docs/mcp.md).
//
// Written once against the net seam, like the chat pipeline: it never knows
// which HTTP version the caller speaks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "relay/config/config.hpp"
#include "relay/net/exchange.hpp"
#include "relay/pipeline/mcp_session.hpp"
#include "relay/upstream/client.hpp"

namespace relay::pipeline {

class Worker;

struct McpInstance {
  upstream::Target target;
  std::size_t poolIndex = 0;  // index in McpUpstreams::pool
};

struct McpServerRoute {
  std::size_t index = 0;  // position in config.mcp.servers (the telemetry id)
  std::string name;
  std::vector<McpInstance> instances;  // >= 1
  std::string authorization;           // "Bearer <api_key>", or "" for none
  std::string region;                  // "" = no x-relay-region
  std::uint32_t nextInstance = 0;      // round-robin cursor for new sessions
};

// One worker's view of the MCP servers of its snapshot: their routes, the
// session codec and a client pool over every instance. Used only on the
// worker's own thread; an exchange holds it by shared_ptr, so a reload that
// replaces it never pulls a pool or a route from under a running stream.
struct McpUpstreams {
  std::vector<McpServerRoute> servers;
  std::vector<std::string> instanceUrls;  // flat, in pool order ("url\nca_file")
  std::shared_ptr<upstream::ClientPool> pool;
  McpSessionCodec codec;

  explicit McpUpstreams(std::string secret) : codec(std::move(secret)) {}

  // The server called `name`; "" is the first. nullptr when there is none.
  McpServerRoute* find(std::string_view name);
};

// Builds the routes for `mcp`. The client pool of `previous` is kept when the
// instance URLs are the same (its idle connections stay usable); otherwise a
// new pool is made. Throws std::invalid_argument on an unusable URL (the
// config parser has already refused those).
std::shared_ptr<McpUpstreams> makeMcpUpstreams(const config::Mcp& mcp,
                                               const McpUpstreams* previous);

// Ends idle MCP sessions at their servers (mcp.session_idle_ms, see
// mcp_activity.hpp). Runs on one worker until its loop stops.
net::Task<void> runMcpSessionSweeper(Worker& worker);

// Serves one request on /v1/mcp (`serverName` "") or /v1/mcp/{serverName}
// (also /v1/mcp/{serverName}/initialize, the initialize of that server).
net::Task<void> handleMcp(Worker& worker, net::Exchange& exchange, std::string serverName);

}  // namespace relay::pipeline
