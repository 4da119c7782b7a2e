// GET /v1/events (and /v1/mcp/{server}/events, /admin/events): the relay
// event stream as SSE (pipeline/events.hpp). A caller key sees its own
// requests; the admin key sees everything. Query filters: kind (a prefix such
// as "request." or "upstream.ejected"), node, upstream, and key (admin only).
#pragma once

#include <string>

#include "relay/net/exchange.hpp"
#include "relay/pipeline/snapshot.hpp"

namespace relay::api {

// `server`: an MCP server's events only ("" = all). `adminOnly`: the admin
// listener, where only the admin key is accepted.
net::Task<void> handleEvents(std::shared_ptr<const pipeline::Snapshot> snapshot,
                             net::Exchange& exchange, std::string server, bool adminOnly);

}  // namespace relay::api
