// /v1/mcp[/{server}]: check (origin, transport headers, key, allow-list,
// session) -> forward (credential swapped, session unwrapped, idempotent calls
// retried while unreachable) -> relay the answer as the server gives it (JSON,
// 202, or SSE passed through byte for byte, event ids intact) -> record.
#include <algorithm>
#include <chrono>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "mcp_forward.hpp"
#include "relay/common/json_write.hpp"
#include "relay/common/limits.hpp"
#include "relay/sse/parser.hpp"
#include "relay/common/request_id.hpp"
#include "relay/admission/clock.hpp"
#include "relay/pipeline/mcp.hpp"
#include "relay/pipeline/mcp_activity.hpp"
#include "relay/pipeline/mcp_request.hpp"
#include "relay/pipeline/respond.hpp"
#include "relay/pipeline/steps.hpp"
#include "relay/pipeline/worker.hpp"

namespace relay::pipeline {
namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long an MCP stream may stay silent, and how long a tool may think before
// its first byte. Servers send keep-alives every 15 s (the TypeScript SDK), so
// only a dead upstream stays silent this long.
constexpr milliseconds kStreamIdle = std::chrono::minutes(5);

constexpr std::string_view kExposedHeaders =
    "mcp-session-id, mcp-protocol-version, x-relay-region, x-request-id";

std::string_view mediaType(std::string_view contentType) {
  std::string_view t = contentType.substr(0, contentType.find(';'));
  while (!t.empty() && t.back() == ' ')
    t.remove_suffix(1);
  return t;
}

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

std::int64_t steadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             SteadyClock::now().time_since_epoch())
      .count();
}

// Ends `session` at its server (best effort, short deadlines): the gateway
// has forgotten it, so the server should free what it holds.
net::Task<void> deleteUpstreamSession(McpUpstreams& upstreams, const McpSession& session,
                                      const config::Config& cfg) {
  if (session.server >= upstreams.servers.size()) co_return;
  McpServerRoute& route = upstreams.servers[session.server];
  if (session.instance >= route.instances.size()) co_return;
  McpSend send;
  send.method = "DELETE";
  send.headers.set("mcp-session-id", session.upstreamId);
  if (!route.authorization.empty()) send.headers.set("authorization", route.authorization);
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

// One MCP exchange. Its destructor records it, so an exchange whose caller
// left (the coroutine frame destroyed mid-await) is counted too.
class McpExchange {
 public:
  McpExchange(Worker& worker, net::Exchange& ex)
      : worker_(worker),
        ex_(ex),
        sink_(*ex.response),
        snapshot_(worker.snapshotPtr()),
        upstreams_(worker.mcpUpstreams()),
        start_(SteadyClock::now()) {}

  ~McpExchange() {
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
  McpExchange(const McpExchange&) = delete;
  McpExchange& operator=(const McpExchange&) = delete;

  net::Task<void> run(std::string serverName);

 private:
  net::Task<void> refuse(McpRefusal refusal);
  net::Task<void> deliverWhole(upstream::ResponseStream& r, Headers headers, bool hadSession);
  net::Task<void> deliverStream(upstream::ResponseStream& r, Headers headers);
  net::Task<void> preflight();
  std::optional<McpRefusal> toolNotAllowed() const;
  std::optional<McpRefusal> admit();

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
  Headers base_;  // on every answer: x-request-id, x-relay-region, CORS
  int status_ = 0;
  bool streamOpen_ = false;
  admission::Reservation reservation_;  // rpm token and concurrency slot, held while open
};

// A refusal made by the gateway: a JSON-RPC error carrying the request's id
// when the body had one, else the gateway's plain (OpenAI-shaped) error.
net::Task<void> McpExchange::refuse(McpRefusal refusal) {
  status_ = refusal.status;
  Headers h = base_;
  for (const HeaderField& f : refusal.headers)
    h.add(f.name, f.value);
  std::string_view type = refusal.status >= 500 ? "server_error" : "invalid_request_error";
  std::string body = peek_.idJson.empty()
                         ? openAiErrorJson(refusal.message, type, refusal.code)
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
          "mcp-protocol-version, last-event-id");
    h.add("access-control-max-age", "600");
  }
  status_ = 204;
  net::ResponseHead head;
  head.status = 204;
  head.headers = std::move(h);
  std::string noBody;
  co_await sink_.respond(std::move(head), std::move(noBody));
}

// keys[].mcp_tools: a tools/call of a tool the key's list for this server
// does not name is refused as a JSON-RPC error naming it.
std::optional<McpRefusal> McpExchange::toolNotAllowed() const {
  if (peek_.kind != JsonRpcPeek::Kind::kRequest || peek_.method != "tools/call") return std::nullopt;
  const auto& tools = tenant_->config->mcpTools;
  auto it = tools.find(route_->name);
  if (it == tools.end()) return std::nullopt;
  if (std::find(it->second.begin(), it->second.end(), peek_.toolName) != it->second.end())
    return std::nullopt;
  std::string allowed;
  for (const std::string& t : it->second) allowed += (allowed.empty() ? "" : ", ") + t;
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
std::optional<McpRefusal> McpExchange::admit() {
  const auto& clock = admission::SystemClock::instance();
  admission::KeyLimiter& limiter = *snapshot_->limiters[tenant_->index];
  limiter.headers(clock.steadyNow()).appendTo(base_);
  admission::Budget& budget = snapshot_->budgets->budget(tenant_->index);
  if (std::optional<admission::BudgetRefusal> spent = budget.check(clock.wallNow())) {
    snapshot_->telemetry->refusal(telemetry::RefusalReason::kBudget);
    McpRefusal r{429, kRpcTransportError, std::move(spent->message), "insufficient_quota"};
    r.headers.add("x-should-retry", "false");
    return r;
  }
  const bool stream = ex_.head.method == "GET";
  admission::AdmitResult admitted = limiter.admit(0, clock.steadyNow(), /*holdSlot=*/!stream);
  if (admitted) {
    reservation_ = std::move(admitted.reservation());
    return std::nullopt;
  }
  const admission::Refusal& refusal = admitted.refusal();
  snapshot_->telemetry->refusal(refusal.kind == admission::RefusalKind::kConcurrency
                                    ? telemetry::RefusalReason::kConcurrency
                                    : telemetry::RefusalReason::kRequests);
  McpRefusal r{429, kRpcTransportError, refusal.message, "rate_limit_exceeded"};
  refusal.appendHeaders(r.headers);
  return r;
}

net::Task<void> McpExchange::run(std::string serverName) {
  const net::RequestHead& req = ex_.head;
  base_.add("x-request-id", requestIdFrom(req.headers.get("x-request-id")));
  // The key is checked on the head; only a known caller's body is read (its
  // JSON-RPC id then goes into every refusal). A caller with a bad key is
  // refused below, in its turn, without a byte of its body read.
  std::optional<ApiError> authError = authenticate(snapshot_->keys, req.headers, tenant_);
  if (!authError && req.method == "POST") {
    net::BodyResult body = co_await ex_.readBody();
    if (body.status == net::BodyStatus::kGone) co_return;
    if (!body.ok()) {
      McpRefusal r{body.httpStatus(), kRpcTransportError, std::move(body.message),
                   std::string(body.code())};
      co_await refuse(std::move(r));
      co_return;
    }
    peek_ = peekJsonRpc(ex_.body);
  }
  label_ = methodLabel(req.method, peek_);

  route_ = upstreams_ ? upstreams_->find(serverName) : nullptr;
  if (!route_) {
    McpRefusal r{404, kRpcTransportError,
                 serverName.empty() ? "This gateway has no MCP servers (mcp.servers is empty)."
                                    : "This gateway has no MCP server named '" + serverName + "'.",
                 "mcp_server_not_found"};
    co_await refuse(std::move(r));
    co_return;
  }
  if (!route_->region.empty()) base_.add("x-relay-region", route_->region);

  // Origin: refused before anything else; an allowed one gets CORS headers.
  const std::string* origin = req.headers.find("origin");
  if (origin && mcpOriginAllowed(*origin, snapshot_->config.mcp.allowedOrigins)) {
    base_.add("access-control-allow-origin", *origin);
    base_.add("access-control-expose-headers", kExposedHeaders);
    base_.add("vary", "origin");
  }
  const bool preflightRequest = req.method == "OPTIONS";
  if (req.method != "POST" && req.method != "GET" && req.method != "DELETE" && !preflightRequest) {
    McpRefusal r{405, kRpcTransportError,
                 req.method + " is not supported on " + req.path + "; use POST, GET or DELETE.",
                 "method_not_allowed"};
    r.headers.add("allow", "GET, POST, DELETE");
    co_await refuse(std::move(r));
    co_return;
  }
  // An initialize negotiates its version in the body; an unauthenticated
  // request is refused for its key before its version matters.
  const bool initialize = peek_.kind == JsonRpcPeek::Kind::kRequest && peek_.method == "initialize";
  std::optional<McpRefusal> bad =
      checkMcpTransport(preflightRequest ? std::string_view("OPTIONS") : req.method, req.headers,
                        snapshot_->config.mcp.allowedOrigins, initialize || authError.has_value());
  if (bad) {
    McpRefusal r = std::move(*bad);
    co_await refuse(std::move(r));
    co_return;
  }
  if (preflightRequest) {
    co_await preflight();
    co_return;
  }

  // The caller's key. It authenticates at the gateway and never goes further.
  if (std::optional<ApiError> e = std::move(authError)) {
    McpRefusal r{e->status, kRpcTransportError, e->message, e->code};
    if (e->status == 401) r.headers.add("www-authenticate", "Bearer realm=\"kimi-relay\"");
    co_await refuse(std::move(r));
    co_return;
  }
  if (!tenant_->mayUseMcpServer(route_->name)) {
    McpRefusal r{403, kRpcTransportError,
                 "The key '" + tenant_->name + "' may not use the MCP server '" + route_->name +
                     "' (see mcp_servers of this key).",
                 "mcp_server_not_allowed"};
    co_await refuse(std::move(r));
    co_return;
  }
  if (req.method == "POST" && peek_.kind == JsonRpcPeek::Kind::kInvalid) {
    McpRefusal r{400, kRpcParseError, "Parse error: the body is not a JSON-RPC message.",
                 "invalid_json_rpc"};
    co_await refuse(std::move(r));
    co_return;
  }
  if (std::optional<McpRefusal> r = toolNotAllowed()) {
    co_await refuse(std::move(*r));
    co_return;
  }
  if (std::optional<McpRefusal> r = admit()) {
    co_await refuse(std::move(*r));
    co_return;
  }

  // The session: signed by a gateway with our secret, for this server, this
  // key, and an instance that still exists. Anything else is unknown (404).
  McpSend send;
  std::string upstreamSession;
  if (const std::string* sid = req.headers.find("mcp-session-id")) {
    std::optional<McpSession> s = upstreams_->codec.decode(*sid);
    if (!s || s->server != route_->index || s->instance >= route_->instances.size() ||
        s->tenant != tenant_->name) {
      McpRefusal r{404, kRpcSessionNotFound,
                   "Session not found: the Mcp-Session-Id is unknown to this gateway, or belongs "
                   "to another key or server; initialize a new session.",
                   "mcp_session_not_found"};
      co_await refuse(std::move(r));
      co_return;
    }
    // Idle too long (mcp.session_idle_ms): ended here and at the server.
    const auto idleMs = static_cast<std::int64_t>(snapshot_->config.mcp.sessionIdleMs);
    if (mcpActivity().touch(*sid, *s, steadyMs(), idleMs) == McpActivity::Touch::kExpired) {
      co_await deleteUpstreamSession(*upstreams_, *s, snapshot_->config);
      McpRefusal r{404, kRpcSessionNotFound,
                   "Session not found: it was idle for longer than " + std::to_string(idleMs) +
                       " ms (mcp.session_idle_ms) and has ended; initialize a new session.",
                   "mcp_session_expired"};
      co_await refuse(std::move(r));
      co_return;
    }
    if (req.method == "DELETE") mcpActivity().forget(*sid);
    send.pinned = s->instance;
    upstreamSession = std::move(s->upstreamId);
  }

  const config::Config& cfg0 = snapshot_->config;
  // Credentials are swapped: the caller's are dropped with the other fields
  // that never leave the gateway, the server's own is injected.
  send.headers = forwardableHeaders(req.headers, ForwardFor::kMcp, cfg0.forwardHeaders);
  send.headers.set("x-forwarded-for", forwardedFor(req, cfg0.server.trustedProxies));
  if (!upstreamSession.empty()) send.headers.set("mcp-session-id", upstreamSession);
  if (!route_->authorization.empty()) send.headers.set("authorization", route_->authorization);
  send.headers.set("x-request-id", base_.get("x-request-id"));
  send.headers.set("accept-encoding", "identity");  // bytes are relayed as they come

  const config::Config& cfg = snapshot_->config;
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

  McpSent sent = co_await sendMcp(*upstreams_, *route_, std::move(send));
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

  upstream::ResponseStream& resp = *sent.response;
  Headers h = base_;
  for (const char* name : {"content-type", "cache-control", "retry-after", "allow",
                           "mcp-protocol-version", "x-accel-buffering"}) {
    if (const std::string* v = resp.headers().find(name)) h.add(name, *v);
  }
  if (const std::string* sid = resp.headers().find("mcp-session-id")) {
    McpSession session{static_cast<std::uint16_t>(route_->index),
                       static_cast<std::uint16_t>(sent.instance), tenant_->name, *sid};
    std::optional<std::string> wrapped = upstreams_->codec.encode(session);
    if (!wrapped) {
      McpRefusal r{502, kRpcInternalError,
                   "MCP server '" + route_->name + "' returned an unusable Mcp-Session-Id.",
                   "upstream_invalid_session"};
      co_await refuse(std::move(r));
      co_return;
    }
    h.set("mcp-session-id", *wrapped);
    if (upstreamSession.empty()) {  // a new session: its idle clock starts now
      mcpActivity().touch(*wrapped, session, steadyMs(),
                          static_cast<std::int64_t>(snapshot_->config.mcp.sessionIdleMs));
    }
  }
  if (resp.status() == 401 || resp.status() == 407) {
    // The server refused the gateway's own credential: the caller cannot fix that.
    McpRefusal r{502, kRpcInternalError,
                 "MCP server '" + route_->name + "' refused the gateway's credential (HTTP " +
                     std::to_string(resp.status()) + "); check mcp.servers[].api_key.",
                 "upstream_auth_failed"};
    co_await refuse(std::move(r));
    co_return;
  }
  if (resp.status() == 200 &&
      mediaType(resp.headers().get("content-type")) == "text/event-stream") {
    co_await deliverStream(resp, std::move(h));
  } else {
    co_await deliverWhole(resp, std::move(h), !upstreamSession.empty());
  }
}

net::Task<void> McpExchange::deliverWhole(upstream::ResponseStream& r, Headers headers,
                                          bool hadSession) {
  std::string body;
  const std::uint64_t cap = snapshot_->config.mcp.servers[route_->index].maxResponseBytes;
  if (!co_await r.readAll(body, cap)) {
    if (sink_.clientGone()) co_return;
    McpRefusal e{502, kRpcInternalError,
                 "MCP server '" + route_->name +
                     "' failed while sending its answer: " + upstream::describe(r.failure()) + ".",
                 "upstream_unavailable"};
    co_await refuse(std::move(e));
    co_return;
  }
  int status = r.status();
  // Spec: an unknown or ended session gets 404, so that the client starts a
  // new one. Some servers answer 400; the gateway corrects that.
  if (hadSession && status == 400 && mentionsUnknownSession(body)) {
    status = 404;
    body = jsonRpcErrorBody(peek_.idJson, kRpcSessionNotFound,
                            "Session not found: the MCP server no longer knows this session; "
                            "initialize a new session.");
    headers.set("content-type", "application/json");
    headers.remove("mcp-session-id");
  }
  status_ = status;
  net::ResponseHead head;
  head.status = status;
  head.headers = std::move(headers);
  co_await sink_.respond(std::move(head), std::move(body));
}

// Relays an SSE body byte for byte as it arrives: event ids, priming events,
// retry fields and keep-alive comments reach the caller unchanged.
net::Task<void> McpExchange::deliverStream(upstream::ResponseStream& r, Headers headers) {
  if (!headers.contains("cache-control")) headers.add("cache-control", "no-cache, no-transform");
  headers.set("x-accel-buffering", "no");
  status_ = r.status();
  if (ex_.head.method == "GET") {
    headAt_ = SteadyClock::now();
    snapshot_->telemetry->mcpStreamOpened(static_cast<std::uint32_t>(route_->index));
    streamOpen_ = true;
  }
  net::ResponseHead head;
  head.status = r.status();
  head.headers = std::move(headers);
  if (!co_await sink_.start(std::move(head))) co_return;
  // Registered with the worker while open, so that the end of a drain can
  // abort it (the caller then resumes on another gateway).
  struct Registration {
    Worker& worker;
    upstream::ResponseStream* stream;
    ~Registration() { worker.streamEnded(stream); }
  } registration{worker_, &r};
  worker_.streamStarted(&r);
  // Whole events only: an event over the server's cap then ends the stream
  // with an error event of its own, never glued to a partial one.
  const std::size_t cap = snapshot_->config.mcp.servers[route_->index].maxResponseBytes;
  sse::Parser events(sse::ParserLimits{cap});
  std::string chunk;
  chunk.reserve(16 * 1024);
  for (;;) {
    chunk.clear();
    bool more = co_await r.read(chunk);
    events.consume();  // written by the previous round
    events.feed(chunk);
    if (events.parse() != sse::ParseStatus::kOk) {
      countLimit(Limit::kSseEventBytes);
      std::string error = "event: message\ndata: ";
      error += jsonRpcErrorBody(peek_.idJson.empty() ? "null" : peek_.idJson, kRpcInternalError,
                                "MCP server '" + route_->name + "' sent an event larger than " +
                                    std::to_string(cap) +
                                    " bytes (mcp.servers[].max_response_bytes); the stream was ended");
      error += "\n\n";
      if (co_await sink_.write(error)) co_await sink_.finish();
      co_return;
    }
    std::string_view whole = events.completeBytes();
    if (!whole.empty() && !co_await sink_.write(whole)) co_return;  // caller gone
    if (!more) break;
  }
  if (r.failure()) {
    // Never a clean end for a broken stream: the client sees the failure and
    // resumes with Last-Event-ID instead of waiting for an answer that will
    // not come on this stream.
    if (!sink_.clientGone()) sink_.abort();
    co_return;
  }
  co_await sink_.finish();
}

}  // namespace

net::Task<void> runMcpSessionSweeper(Worker& worker) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  for (;;) {
    std::shared_ptr<const Snapshot> snap = worker.snapshotPtr();
    const auto idle = milliseconds(snap->config.mcp.sessionIdleMs);
    timer.expires_after(std::clamp<milliseconds>(idle / 4, milliseconds(250), milliseconds(30'000)));
    co_await timer.async_wait(boost::asio::use_awaitable);
    if (worker.shuttingDown()) co_return;
    snap = worker.snapshotPtr();
    std::shared_ptr<McpUpstreams> upstreams = worker.mcpUpstreams();
    if (!upstreams) continue;
    for (const McpSession& s : mcpActivity().takeExpired(
             steadyMs(), static_cast<std::int64_t>(snap->config.mcp.sessionIdleMs), 64)) {
      co_await deleteUpstreamSession(*upstreams, s, snap->config);
    }
  }
}

net::Task<void> handleMcp(Worker& worker, net::Exchange& exchange, std::string serverName) {
  McpExchange mcp(worker, exchange);
  co_await mcp.run(std::move(serverName));
}

}  // namespace relay::pipeline
