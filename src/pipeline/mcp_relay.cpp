// /v1/mcp[/{server}]: check (key on the head, origin, transport headers,
// allow-lists, admission, session) -> forward (credential swapped, session
// unwrapped, idempotent calls retried while unreachable) -> answer
// (mcp_answer.cpp) -> record.
#include <algorithm>
#include <charconv>
#include <chrono>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "mcp_exchange.hpp"
#include "relay/admission/clock.hpp"
#include "relay/common/json_write.hpp"
#include "relay/common/request_id.hpp"
#include "relay/pipeline/mcp_activity.hpp"
#include "relay/pipeline/steps.hpp"

namespace relay::pipeline {
namespace {

using std::chrono::milliseconds;

// How long an MCP stream may stay silent, and how long a tool may think before
// its first byte. Servers send keep-alives every 15 s (the TypeScript SDK), so
// only a dead upstream stays silent this long.
constexpr milliseconds kStreamIdle = std::chrono::minutes(5);

constexpr std::string_view kExposedHeaders =
    "mcp-session-id, mcp-protocol-version, x-relay-region, x-request-id, traceparent";

telemetry::McpMethod methodLabel(std::string_view httpMethod, const JsonRpcPeek& peek) {
  using telemetry::McpMethod;
  if (httpMethod == "GET") return McpMethod::kStreamOpen;
  if (httpMethod == "DELETE") return McpMethod::kSessionDelete;
  switch (peek.kind) {
    case JsonRpcPeek::Kind::kRequest:
    case JsonRpcPeek::Kind::kNotification:
      return telemetry::mcpMethodOf(peek.method);
    case JsonRpcPeek::Kind::kResponse:
      return McpMethod::kResponse;
    case JsonRpcPeek::Kind::kBatch:
      return McpMethod::kBatch;
    case JsonRpcPeek::Kind::kInvalid:
      break;
  }
  return McpMethod::kOther;
}

}  // namespace

std::int64_t mcpSteadyMs() {
  return std::chrono::duration_cast<milliseconds>(SteadyClock::now().time_since_epoch()).count();
}

net::Task<void> deleteUpstreamSession(McpUpstreams& upstreams, const McpSession& session,
                                      const config::Config& cfg) {
  if (session.server >= upstreams.servers.size()) co_return;
  McpServerRoute& route = upstreams.servers[session.server];
  if (session.instance >= route.instances.size()) co_return;
  McpSend send;
  send.method = "DELETE";
  send.headers.set("mcp-session-id", session.upstreamId);
  if (!route.authorization.empty()) send.headers.set("authorization", route.authorization);
  if (!session.protocolVersion.empty())
    send.headers.set("mcp-protocol-version", session.protocolVersion);
  send.headers.set("user-agent", "kimi-relay");
  send.pinned = session.instance;
  send.deadlines.connect = std::min(milliseconds(cfg.timeouts.connectMs), milliseconds(2000));
  send.deadlines.firstByte = milliseconds(2000);
  send.deadlines.idle = milliseconds(2000);
  send.deadlines.total = SteadyClock::now() + milliseconds(4000);
  McpSent sent = co_await sendMcp(upstreams, route, std::move(send));
  if (sent.response) {
    std::string ignored;
    co_await sent.response->readAll(ignored, 64 * 1024);
  }
}

McpExchange::McpExchange(Worker& worker, net::Exchange& ex)
    : worker_(worker),
      ex_(ex),
      sink_(*ex.response),
      snapshot_(worker.snapshotPtr()),
      upstreams_(worker.mcpUpstreams()),
      start_(SteadyClock::now()) {}

McpExchange::~McpExchange() {
  if (streamOpen_) snapshot_->telemetry->mcpStreamClosed(route_->index);
  telemetry::McpRecord r;
  if (tenant_) {
    r.keyName = tenant_->name;
    r.keyId = static_cast<std::uint32_t>(tenant_->index);
  }
  if (route_) {
    r.server = route_->name;
    r.serverId = static_cast<std::uint32_t>(route_->index);
  }
  r.method = label_;
  r.status = status_ != 0 ? status_ : (sink_.clientGone() ? 499 : 0);
  auto end = headAt_.value_or(SteadyClock::now());
  r.durationUs = std::chrono::duration_cast<std::chrono::microseconds>(end - start_).count();
  snapshot_->telemetry->recordMcp(r);
}

net::Task<void> McpExchange::run(std::string serverName, bool initializePath) {
  const net::RequestHead& req = ex_.head;
  base_.add("x-request-id", requestIdFrom(req.headers.get("x-request-id")));
  trace_ = traceFrom(req.headers);
  base_.add("traceparent", trace_.traceparent());
  // The key is checked on the head; only a known caller's body is read (its
  // JSON-RPC id then goes into every refusal). A caller with a bad key is
  // refused below, in its turn, without a byte of its body read.
  std::optional<ApiError> authError = authenticate(snapshot_->keys, req.headers, tenant_);
  if (!authError && req.method == "POST") {
    const bool read = co_await readRequestBody();  // not inside &&: GCC 12 miscompiles that
    if (!read) co_return;
  }
  label_ = methodLabel(req.method, peek_);

  std::optional<McpRefusal> refusal = findRoute(serverName);
  if (!refusal) {
    addCorsHeaders();
    refusal = checkRequest(initializePath, !authError);
  }
  if (!refusal && req.method == "OPTIONS") {
    co_await preflight();
    co_return;
  }
  if (!refusal) refusal = checkCaller(std::move(authError));
  if (!refusal) refusal = toolNotAllowed();
  if (!refusal) refusal = co_await admit();
  if (!refusal) refusal = co_await resolveSession();
  if (refusal) {
    co_await refuse(std::move(*refusal));
    co_return;
  }
  McpSent sent = co_await sendMcp(*upstreams_, *route_, buildSend());
  if (!sent.response) {
    if (sink_.clientGone()) co_return;
    bool timeout = upstream::failureClass(sent.failure.kind) == "timeout";
    McpRefusal r{timeout ? 504 : 502, kRpcInternalError,
                 "MCP server '" + route_->name + "' could not be reached after " +
                     std::to_string(sent.attempts) +
                     " attempt(s): " + upstream::describe(sent.failure) + ".",
                 timeout ? "upstream_timeout" : "upstream_unavailable"};
    co_await refuse(std::move(r));
    co_return;
  }
  co_await answer(std::move(sent));
}

RelayEvent McpExchange::event(std::string_view kind) const {
  RelayEvent e;
  e.kind = kind;
  e.requestId = base_.get("x-request-id");
  e.traceId = trace_.traceId;
  if (tenant_) e.key = tenant_->name;
  e.node = ex_.head.headers.get("x-node-id").substr(0, 64);
  if (route_) e.server = route_->name;
  return e;
}

// False when the exchange is over (answered or the caller left).
net::Task<bool> McpExchange::readRequestBody() {
  net::BodyResult body = co_await ex_.readBody();
  if (body.status == net::BodyStatus::kGone) co_return false;
  if (!body.ok()) {
    McpRefusal r{body.httpStatus(), kRpcTransportError, std::move(body.message),
                 std::string(body.code())};
    co_await refuse(std::move(r));
    co_return false;
  }
  peek_ = peekJsonRpc(ex_.body);
  co_return true;
}

std::optional<McpRefusal> McpExchange::findRoute(const std::string& serverName) {
  route_ = upstreams_ ? upstreams_->find(serverName) : nullptr;
  if (!route_) {
    return McpRefusal{404, kRpcTransportError,
                      serverName.empty()
                          ? "This gateway has no MCP servers (mcp.servers is empty)."
                          : "This gateway has no MCP server named '" + serverName + "'.",
                      "mcp_server_not_found"};
  }
  if (!route_->region.empty()) base_.add("x-relay-region", route_->region);
  return std::nullopt;
}

// An allowed Origin gets CORS headers on every answer (a foreign one is
// refused by checkRequest, before anything else).
void McpExchange::addCorsHeaders() {
  const std::optional<std::string_view> origin = ex_.head.headers.find("origin");
  if (origin && mcpOriginAllowed(*origin, snapshot_->config.mcp.allowedOrigins)) {
    base_.add("access-control-allow-origin", *origin);
    base_.add("access-control-expose-headers", kExposedHeaders);
    base_.add("vary", "origin");
  }
}

// The method, the /initialize path, and the transport headers. The protocol
// version is checked later, against the session's (resolveSession).
std::optional<McpRefusal> McpExchange::checkRequest(bool initializePath, bool authenticated) {
  const net::RequestHead& req = ex_.head;
  const bool preflight = req.method == "OPTIONS";
  if (req.method != "POST" && req.method != "GET" && req.method != "DELETE" && !preflight) {
    McpRefusal r{405, kRpcTransportError,
                 req.method + " is not supported on " + req.path + "; use POST, GET or DELETE.",
                 "method_not_allowed"};
    r.headers.add("allow", "GET, POST, DELETE");
    return r;
  }
  std::optional<McpRefusal> bad =
      checkMcpTransport(preflight ? std::string_view("OPTIONS") : req.method, req.headers,
                        snapshot_->config.mcp.allowedOrigins, /*versionChecked=*/true);
  if (bad) return bad;
  plain_ = req.method == "POST" && mcpAcceptMode(req.headers.get("accept")) == McpAccept::kJsonOnly;
  const bool initialize = peek_.kind == JsonRpcPeek::Kind::kRequest && peek_.method == "initialize";
  if (initializePath && authenticated && !preflight && (req.method != "POST" || !initialize)) {
    return McpRefusal{400, kRpcInvalidRequest,
                      req.path +
                          " takes only a POST of an initialize request; send other "
                          "messages to " +
                          req.path.substr(0, req.path.rfind('/')) + ".",
                      "not_an_initialize"};
  }
  return std::nullopt;
}

// The caller's key (it authenticates at the gateway and never goes further),
// the key's server allow-list, and a body that is JSON-RPC.
std::optional<McpRefusal> McpExchange::checkCaller(std::optional<ApiError> authError) {
  if (authError) {
    McpRefusal r{authError->status, kRpcTransportError, authError->message, authError->code};
    if (authError->status == 401) r.headers.add("www-authenticate", "Bearer realm=\"kimi-relay\"");
    return r;
  }
  if (!tenant_->mayUseMcpServer(route_->name)) {
    return McpRefusal{403, kRpcTransportError,
                      "The key '" + tenant_->name + "' may not use the MCP server '" +
                          route_->name + "' (see mcp_servers of this key).",
                      "mcp_server_not_allowed"};
  }
  if (ex_.head.method == "POST" && peek_.kind == JsonRpcPeek::Kind::kInvalid) {
    return McpRefusal{400, kRpcParseError, "Parse error: the body is not a JSON-RPC message.",
                      "invalid_json_rpc"};
  }
  return std::nullopt;
}

// keys[].mcp_tools: a tools/call of a tool the key's list for this server
// does not name is refused as a JSON-RPC error naming it.
std::optional<McpRefusal> McpExchange::toolNotAllowed() const {
  if (peek_.kind != JsonRpcPeek::Kind::kRequest || peek_.method != "tools/call")
    return std::nullopt;
  const auto& tools = tenant_->config->mcpTools;
  auto it = tools.find(route_->name);
  if (it == tools.end()) return std::nullopt;
  if (std::find(it->second.begin(), it->second.end(), peek_.toolName) != it->second.end())
    return std::nullopt;
  std::string allowed;
  for (const std::string& t : it->second)
    allowed += (allowed.empty() ? "" : ", ") + t;
  return McpRefusal{403, kRpcInvalidParams,
                    "The key '" + tenant_->name + "' may not call the tool '" + peek_.toolName +
                        "' on the MCP server '" + route_->name + "'. Allowed tools: " +
                        (allowed.empty() ? "(none)" : allowed) + " (keys[].mcp_tools).",
                    "mcp_tool_not_allowed"};
}

// MCP requests are admitted like chat requests: one request against the
// key's rpm, and a concurrency slot held while the exchange is open. A GET
// (the server-to-client stream, open for as long as the session lives)
// counts against rpm when it opens but holds no slot, or one open stream
// would block every call of a key with concurrency: 1. A key whose budget is
// spent is refused here too.
net::Task<std::optional<McpRefusal>> McpExchange::admit() {
  KeyGate& gate = worker_.gate();
  GateAsk ask;
  ask.tenant = tenant_;
  ask.holdSlot = ex_.head.method != "GET";
  ask.refuseWhenSpent = true;
  GateResult admitted = co_await gate.admit(*snapshot_, ask);
  admitted.rateHeaders.appendTo(base_);
  if (admitted.ticket) {
    ticket_ = std::move(admitted.ticket);
    co_return std::nullopt;
  }
  ApiError& refused = *admitted.refusal;
  const telemetry::RefusalReason reason = *admitted.reason;
  snapshot_->telemetry->refusal(reason);
  if (snapshot_->eventsWanted() && reason != telemetry::RefusalReason::kSharedState) {
    RelayEvent e = event("");
    describeRefusal(e, reason, refused);
    snapshot_->publish(e);
  }
  McpRefusal r{refused.status, kRpcTransportError, std::move(refused.message),
               std::move(refused.code), std::move(refused.headers)};
  co_return r;
}

// The session: signed by a gateway with our secret, for this server, this
// key, and an instance that still exists (anything else is unknown: 404); not
// idle for longer than mcp.session_idle_ms; and spoken in the protocol
// version its server agreed to at initialize.
net::Task<std::optional<McpRefusal>> McpExchange::resolveSession() {
  const Headers& headers = ex_.head.headers;
  const bool initialize = peek_.kind == JsonRpcPeek::Kind::kRequest && peek_.method == "initialize";
  const std::optional<std::string_view> sid = headers.find("mcp-session-id");
  const std::optional<std::string_view> version = headers.find("mcp-protocol-version");
  if (!sid) {
    // Without a session only the versions this gateway knows (an initialize
    // negotiates its own in the body).
    if (initialize) co_return std::nullopt;
    co_return checkMcpTransport(ex_.head.method, headers, snapshot_->config.mcp.allowedOrigins,
                                /*versionChecked=*/false);
  }
  std::optional<McpSession> s = upstreams_->codec.decode(*sid);
  if (!s || s->server != route_->index || s->instance >= route_->instances.size() ||
      s->tenant != tenant_->name) {
    co_return McpRefusal{404, kRpcSessionNotFound,
                         "Session not found: the Mcp-Session-Id is unknown to this gateway, or "
                         "belongs to another key or server; initialize a new session.",
                         "mcp_session_not_found"};
  }
  const auto idleMs = static_cast<std::int64_t>(snapshot_->config.mcp.sessionIdleMs);
  const McpActivity::Touch touched =
      mcpActivity().touch(std::string(*sid), *s, mcpSteadyMs(), idleMs);
  if (touched == McpActivity::Touch::kExpired || touched == McpActivity::Touch::kEnded) {
    if (touched == McpActivity::Touch::kExpired) {
      if (snapshot_->eventsWanted()) {
        RelayEvent e = event("mcp.session_closed");
        e.reason = "idle";
        snapshot_->publish(e);
      }
      co_await deleteUpstreamSession(*upstreams_, *s, snapshot_->config);
    }
    co_return McpRefusal{404, kRpcSessionNotFound,
                         "Session not found: it was idle for longer than " +
                             std::to_string(idleMs) +
                             " ms (mcp.session_idle_ms) and has ended; initialize a new session.",
                         "mcp_session_expired"};
  }
  if (version && !s->protocolVersion.empty() && *version != s->protocolVersion) {
    co_return McpRefusal{400, kRpcTransportError,
                         "Bad Request: MCP-Protocol-Version is '" + std::string(*version) +
                             "' but this session's server agreed to '" + s->protocolVersion +
                             "' at initialize; send that version",
                         "protocol_version_mismatch"};
  }
  if (version && s->protocolVersion.empty() && !supportedMcpProtocolVersion(*version)) {
    co_return checkMcpTransport(ex_.head.method, headers, snapshot_->config.mcp.allowedOrigins,
                                /*versionChecked=*/false);
  }
  if (ex_.head.method == "DELETE") {
    mcpActivity().forget(std::string(*sid));
    if (snapshot_->eventsWanted()) {
      RelayEvent e = event("mcp.session_closed");
      e.reason = "deleted";
      snapshot_->publish(e);
    }
  }
  session_ = std::move(s);
  co_return std::nullopt;
}

// The request as the server gets it. Credentials are swapped: the caller's
// stay at the gateway with every field not on the allow-list, the server's
// own is injected.
McpSend McpExchange::buildSend() {
  const net::RequestHead& req = ex_.head;
  const config::Config& cfg = snapshot_->config;
  McpSend send;
  send.headers = forwardableHeaders(req.headers, ForwardFor::kMcp, cfg.forwardHeaders);
  send.headers.set("x-forwarded-for", forwardedFor(req, cfg.server.trustedProxies));
  if (session_) {
    send.pinned = session_->instance;
    send.headers.set("mcp-session-id", session_->upstreamId);
  }
  if (!route_->authorization.empty()) send.headers.set("authorization", route_->authorization);
  send.headers.set("x-request-id", base_.get("x-request-id"));
  // The server's parent span is the gateway's (trace_context.hpp).
  send.headers.set("traceparent", trace_.traceparent());
  send.headers.remove("tracestate");
  if (!trace_.tracestate.empty()) send.headers.set("tracestate", trace_.tracestate);
  send.headers.set("accept-encoding", "identity");  // bytes are relayed as they come
  if (req.method == "POST") {
    // The server is spoken to as the spec requires, whatever a plain
    // caller accepts: its answer is gathered into JSON for it (mcp_answer.cpp).
    send.headers.set("accept", "application/json, text/event-stream");
    send.headers.set("content-type", "application/json");
  }
  const bool idempotent = idempotentMcpCall(peek_) || req.method != "POST";
  send.method = req.method;
  send.body = ex_.body;
  send.deadlines.connect = milliseconds(cfg.timeouts.connectMs);
  // Quick calls get the configured first-byte timeout; a tool call or a
  // stream may legitimately think for minutes before its first byte.
  send.deadlines.firstByte = idempotent && req.method != "GET"
                                 ? milliseconds(cfg.timeouts.firstByteMs)
                                 : std::max(milliseconds(cfg.timeouts.firstByteMs), kStreamIdle);
  send.deadlines.idle = std::max(milliseconds(cfg.timeouts.idleMs), kStreamIdle);
  send.retryable = idempotent;
  send.maxAttempts = cfg.retry.maxAttempts;
  send.backoff = {milliseconds(cfg.retry.backoff.baseMs), milliseconds(cfg.retry.backoff.maxMs)};
  return send;
}

// A refusal made by the gateway: a JSON-RPC error carrying the request's id
// when the body had one, else the gateway's plain (OpenAI-shaped) error.
net::Task<void> McpExchange::refuse(McpRefusal refusal) {
  status_ = refusal.status;
  Headers h = base_;
  for (const HeaderField& f : refusal.headers)
    h.add(f.name, f.value);
  std::string_view type = refusal.status >= 500 ? "server_error" : "invalid_request_error";
  std::string body = peek_.idJson.empty()
                         ? openAiErrorJson(refusal.message, type, refusal.code, {}, trace_.traceId)
                         : jsonRpcErrorBody(peek_.idJson, refusal.rpcCode, refusal.message);
  co_await respondJson(sink_, refusal.status, std::move(h), std::move(body));
}

// CORS preflight: browsers send it without credentials before a POST that
// carries Authorization or Mcp-Session-Id.
net::Task<void> McpExchange::preflight() {
  Headers h = base_;
  h.add("allow", "GET, POST, DELETE, OPTIONS");
  if (ex_.head.headers.contains("origin")) {
    h.add("access-control-allow-methods", "GET, POST, DELETE");
    h.add("access-control-allow-headers",
          "authorization, x-api-key, content-type, accept, mcp-session-id, "
          "mcp-protocol-version, last-event-id, traceparent, tracestate");
    h.add("access-control-max-age", "600");
  }
  status_ = 204;
  net::ResponseHead head;
  head.status = 204;
  head.headers = std::move(h);
  std::string noBody;
  co_await sink_.respond(std::move(head), std::move(noBody));
}

net::Task<void> runMcpSessionSweeper(Worker& worker) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  for (;;) {
    std::shared_ptr<const Snapshot> snap = worker.snapshotPtr();
    const auto idle = milliseconds(snap->config.mcp.sessionIdleMs);
    timer.expires_after(
        std::clamp<milliseconds>(idle / 4, milliseconds(250), milliseconds(30'000)));
    co_await timer.async_wait(boost::asio::use_awaitable);
    if (worker.shuttingDown()) co_return;
    snap = worker.snapshotPtr();
    std::shared_ptr<McpUpstreams> upstreams = worker.mcpUpstreams();
    if (!upstreams) continue;
    for (const McpSession& s : mcpActivity().takeExpired(
             mcpSteadyMs(), static_cast<std::int64_t>(snap->config.mcp.sessionIdleMs), 64)) {
      if (snap->eventsWanted()) {
        RelayEvent e;
        e.kind = "mcp.session_closed";
        e.key = s.tenant;
        if (s.server < snap->config.mcp.servers.size())
          e.server = snap->config.mcp.servers[s.server].name;
        e.reason = "idle";
        snap->publish(e);
      }
      co_await deleteUpstreamSession(*upstreams, s, snap->config);
    }
  }
}

net::Task<void> handleMcp(Worker& worker, net::Exchange& exchange, std::string serverName) {
  // /v1/mcp/{server}/initialize: the initialize of /v1/mcp/{server}, as
  // hosted relays spell it for plain HTTP clients.
  bool initializePath = false;
  if (std::size_t slash = serverName.find('/');
      slash != std::string::npos && serverName.substr(slash + 1) == "initialize") {
    serverName.resize(slash);
    initializePath = true;
  }  // any other sub-path names no server: 404
  McpExchange mcp(worker, exchange);
  co_await mcp.run(std::move(serverName), initializePath);
}

}  // namespace relay::pipeline
