// Sending one MCP request to an instance of a server, with the retry rule of
// the MCP relay: only calls whose repetition changes nothing are sent again,
// only after the upstream could not be reached, and a session's request only
// ever to the instance that holds the session.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "relay/common/headers.hpp"
#include "relay/pipeline/mcp.hpp"
#include "relay/upstream/backoff.hpp"
#include "relay/upstream/client.hpp"

namespace relay::pipeline {

struct McpSend {
  std::string_view method;  // "POST", "GET", "DELETE"
  Headers headers;          // complete: the server's credential already injected
  std::string_view body;    // must outlive the send
  upstream::Deadlines deadlines;
  std::optional<std::size_t> pinned;  // the session's instance; nullopt = pick one
  bool retryable = false;             // idempotent call: may be sent again
  unsigned maxAttempts = 1;
  upstream::BackoffOptions backoff;
};

struct McpSent {
  std::unique_ptr<upstream::ResponseStream> response;  // a head of any status
  std::size_t instance = 0;                            // the instance that answered (or last tried)
  upstream::Failure failure;                           // the last attempt's, when no response
  unsigned attempts = 0;
};

// True for failures that mean the instance could not be reached (nothing was
// processed, or for an idempotent call it does not matter if it was).
bool mcpUnreachable(upstream::FailureKind kind);

// `upstreams` and `server` must outlive the call (the exchange holds them).
// Parameters are by value: GCC 12 mishandles temporaries bound to references
// inside co_await expressions.
net::Task<McpSent> sendMcp(McpUpstreams& upstreams, McpServerRoute& server, McpSend send);

}  // namespace relay::pipeline
