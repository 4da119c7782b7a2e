// One MCP exchange on /v1/mcp[/{server}] (private to pipeline/): the steps
// of mcp_relay.cpp (checks, admission, session, send) and of mcp_answer.cpp
// (the server's answer relayed, or gathered into JSON for a plain client).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "mcp_forward.hpp"
#include "relay/common/trace_context.hpp"
#include "relay/pipeline/mcp.hpp"
#include "relay/pipeline/mcp_request.hpp"
#include "relay/pipeline/respond.hpp"
#include "relay/pipeline/worker.hpp"
#include "relay/sse/parser.hpp"

namespace relay::pipeline {

using SteadyClock = std::chrono::steady_clock;

// Milliseconds of the steady clock (the idle-session table's time).
std::int64_t mcpSteadyMs();

// Ends `session` at its server (best effort, short deadlines).
net::Task<void> deleteUpstreamSession(McpUpstreams& upstreams, const McpSession& session,
                                      const config::Config& cfg);

// Its destructor records the exchange, so one whose caller left (the
// coroutine frame destroyed mid-await) is counted too.
class McpExchange {
 public:
  McpExchange(Worker& worker, net::Exchange& ex);
  ~McpExchange();
  McpExchange(const McpExchange&) = delete;
  McpExchange& operator=(const McpExchange&) = delete;

  // `initializePath`: the request came to /v1/mcp/{server}/initialize.
  net::Task<void> run(std::string serverName, bool initializePath);

 private:
  // mcp_relay.cpp: before anything reaches the server.
  net::Task<bool> readRequestBody();
  std::optional<McpRefusal> findRoute(const std::string& serverName);
  void addCorsHeaders();
  std::optional<McpRefusal> checkRequest(bool initializePath, bool authenticated);
  std::optional<McpRefusal> checkCaller(std::optional<ApiError> authError);
  std::optional<McpRefusal> toolNotAllowed() const;
  net::Task<std::optional<McpRefusal>> admit();
  net::Task<std::optional<McpRefusal>> resolveSession();
  McpSend buildSend();
  net::Task<void> refuse(McpRefusal refusal);
  net::Task<void> preflight();
  RelayEvent event(std::string_view kind) const;  // of this exchange (key, node, server)

  // mcp_answer.cpp: the server's answer.
  net::Task<void> answer(McpSent sent);
  net::Task<void> deliverWhole(upstream::ResponseStream& r, Headers headers, std::size_t instance);
  net::Task<void> deliverStream(upstream::ResponseStream& r, Headers headers, sse::Parser& parser,
                                std::string alreadyRead);
  net::Task<void> deliverGathered(upstream::ResponseStream& r, Headers headers,
                                  std::size_t instance);
  net::Task<bool> gatherUntilResponse(upstream::ResponseStream& r, sse::Parser& parser,
                                      std::string& events, std::string& response);
  std::optional<McpRefusal> wrapSession(const upstream::ResponseStream& r, std::size_t instance,
                                        std::string_view negotiatedVersion, Headers& headers);
  std::uint64_t responseCap() const;

  Worker& worker_;
  net::Exchange& ex_;
  net::ResponseSink& sink_;
  std::shared_ptr<const Snapshot> snapshot_;  // stays valid through a reload
  std::shared_ptr<McpUpstreams> upstreams_;   // likewise: routes and pool
  SteadyClock::time_point start_;
  std::optional<SteadyClock::time_point> headAt_;  // GET: the stream's duration is not latency
  McpServerRoute* route_ = nullptr;
  const admission::Tenant* tenant_ = nullptr;
  JsonRpcPeek peek_;
  telemetry::McpMethod label_ = telemetry::McpMethod::kOther;
  Headers base_;  // on every answer: x-request-id, traceparent, x-relay-region, CORS, rate limits
  TraceContext trace_;  // the caller's trace continued (or a new one), the gateway's span
  int status_ = 0;
  bool streamOpen_ = false;
  bool plain_ = false;                  // the caller takes JSON only (mcpAcceptMode kJsonOnly)
  std::optional<McpSession> session_;   // the request's session, when it carried one
  std::unique_ptr<GateTicket> ticket_;  // rpm token and concurrency slot, held while open
};

}  // namespace relay::pipeline
