// The MCP server's answer on its way to the caller: a JSON body whole (or
// 202), an SSE stream relayed event by event as it arrives (event ids,
// priming events, retry fields and keep-alive comments unchanged), or — for a
// plain HTTP client that takes JSON only — the one JSON-RPC response gathered
// out of the server's SSE answer (notifications before it, such as progress,
// are dropped). An initialize's answer is read up to its response first, so
// that the session id the caller gets carries the protocol version the server
// agreed to.
#include <nlohmann/json.hpp>

#include "mcp_exchange.hpp"
#include "relay/common/limits.hpp"
#include "relay/pipeline/mcp_activity.hpp"
#include "relay/sse/parser.hpp"

namespace relay::pipeline {
namespace {

std::string_view mediaType(std::string_view contentType) {
  std::string_view t = contentType.substr(0, contentType.find(';'));
  while (!t.empty() && t.back() == ' ')
    t.remove_suffix(1);
  return t;
}

// result.protocolVersion of an initialize response, or "".
std::string agreedVersion(std::string_view responseJson) {
  auto j = nlohmann::json::parse(responseJson, nullptr, false);
  if (!j.is_object()) return {};
  auto result = j.find("result");
  if (result == j.end() || !result->is_object()) return {};
  auto version = result->find("protocolVersion");
  return version != result->end() && version->is_string() ? version->get<std::string>()
                                                          : std::string();
}

// True when `data` is the JSON-RPC response (result or error) to `idJson`.
bool isResponseTo(std::string_view data, std::string_view idJson) {
  auto j = nlohmann::json::parse(data, nullptr, false);
  if (!j.is_object() || !(j.contains("result") || j.contains("error"))) return false;
  auto id = j.find("id");
  return id != j.end() && id->dump() == idJson;
}

}  // namespace

std::uint64_t McpExchange::responseCap() const {
  return snapshot_->config.mcp.servers[route_->index].maxResponseBytes;
}

net::Task<void> McpExchange::answer(McpSent sent) {
  upstream::ResponseStream& resp = *sent.response;
  Headers h = base_;
  for (const char* name : {"content-type", "cache-control", "retry-after", "allow",
                           "mcp-protocol-version", "x-accel-buffering"}) {
    if (const std::optional<std::string_view> v = resp.headers().find(name)) h.add(name, *v);
  }
  if (resp.status() == 401 || resp.status() == 403 || resp.status() == 407) {
    // The server refused the gateway's own credential: the caller cannot fix that.
    McpRefusal r{502, kRpcInternalError,
                 "MCP server '" + route_->name + "' refused the gateway's credential (HTTP " +
                     std::to_string(resp.status()) + "); check mcp.servers[].api_key.",
                 "upstream_auth_failed"};
    co_await refuse(std::move(r));
    co_return;
  }
  const bool sse =
      resp.status() == 200 && mediaType(resp.headers().get("content-type")) == "text/event-stream";
  const bool initialize = peek_.kind == JsonRpcPeek::Kind::kRequest && peek_.method == "initialize";
  if (sse && (plain_ || initialize)) {
    co_await deliverGathered(resp, std::move(h), sent.instance);
  } else if (sse) {
    if (std::optional<McpRefusal> bad = wrapSession(resp, sent.instance, {}, h)) {
      co_await refuse(std::move(*bad));
      co_return;
    }
    sse::Parser events(sse::ParserLimits{responseCap()});
    co_await deliverStream(resp, std::move(h), events, {});
  } else {
    co_await deliverWhole(resp, std::move(h), sent.instance);
  }
}

// Wraps the server's Mcp-Session-Id (if it sent one) into the gateway's
// signed id: the request's session keeps its version; a new one gets
// `negotiatedVersion` (what the server answered to initialize).
std::optional<McpRefusal> McpExchange::wrapSession(const upstream::ResponseStream& r,
                                                   std::size_t instance,
                                                   std::string_view negotiatedVersion,
                                                   Headers& headers) {
  const std::optional<std::string_view> sid = r.headers().find("mcp-session-id");
  if (!sid) return std::nullopt;
  McpSession session{static_cast<std::uint16_t>(route_->index),
                     static_cast<std::uint16_t>(instance), tenant_->name, std::string(*sid),
                     session_ ? session_->protocolVersion : std::string(negotiatedVersion)};
  std::optional<std::string> wrapped = upstreams_->codec.encode(session);
  if (!wrapped) {
    return McpRefusal{502, kRpcInternalError,
                      "MCP server '" + route_->name + "' returned an unusable Mcp-Session-Id.",
                      "upstream_invalid_session"};
  }
  headers.set("mcp-session-id", *wrapped);
  if (!session_) {  // a new session: its idle clock starts now
    mcpActivity().touch(*wrapped, session, mcpSteadyMs(),
                        static_cast<std::int64_t>(snapshot_->config.mcp.sessionIdleMs));
    if (snapshot_->eventsWanted()) {
      RelayEvent e = event("mcp.session_opened");
      e.message = session.protocolVersion;
      snapshot_->publish(e);
    }
  }
  return std::nullopt;
}

net::Task<void> McpExchange::deliverWhole(upstream::ResponseStream& r, Headers headers,
                                          std::size_t instance) {
  std::string body;
  if (!co_await r.readAll(body, responseCap())) {
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
  if (session_ && status == 400 && mentionsUnknownSession(body)) {
    status = 404;
    body = jsonRpcErrorBody(peek_.idJson, kRpcSessionNotFound,
                            "Session not found: the MCP server no longer knows this session; "
                            "initialize a new session.");
    headers.set("content-type", "application/json");
  } else {
    const bool initialize =
        peek_.kind == JsonRpcPeek::Kind::kRequest && peek_.method == "initialize";
    if (std::optional<McpRefusal> bad =
            wrapSession(r, instance, initialize ? agreedVersion(body) : std::string(), headers)) {
      co_await refuse(std::move(*bad));
      co_return;
    }
  }
  status_ = status;
  net::ResponseHead head;
  head.status = status;
  head.headers = std::move(headers);
  co_await sink_.respond(std::move(head), std::move(body));
}

// Reads the server's SSE answer up to the JSON-RPC response to this request
// (`response`, its data), keeping every complete event read so far in
// `events`. False when the stream broke or an event was over the cap before
// the response came; true with `response` empty when it ended without one.
net::Task<bool> McpExchange::gatherUntilResponse(upstream::ResponseStream& r, sse::Parser& parser,
                                                 std::string& events, std::string& response) {
  std::string chunk;
  chunk.reserve(16 * 1024);
  for (;;) {
    chunk.clear();
    bool more = co_await r.read(chunk);
    parser.feed(chunk);
    if (parser.parse() != sse::ParseStatus::kOk ||
        events.size() + parser.completeBytes().size() > responseCap()) {
      countLimit(Limit::kSseEventBytes);
      co_return false;
    }
    for (const sse::Event& e : parser.events()) {
      if (response.empty() && e.dispatches() && isResponseTo(e.data, peek_.idJson))
        response = std::string(e.data);
    }
    events.append(parser.completeBytes());
    parser.consume();
    if (!response.empty()) co_return true;
    if (!more) co_return !r.failure();
  }
}

net::Task<void> McpExchange::deliverGathered(upstream::ResponseStream& r, Headers headers,
                                             std::size_t instance) {
  sse::Parser parser(sse::ParserLimits{responseCap()});
  std::string events, response;
  if (!co_await gatherUntilResponse(r, parser, events, response)) {
    if (sink_.clientGone()) co_return;
    McpRefusal e{502, kRpcInternalError,
                 "MCP server '" + route_->name + "' failed while sending its answer: " +
                     (r.failure() ? upstream::describe(r.failure())
                                  : "an event over mcp.servers[].max_response_bytes") +
                     ".",
                 "upstream_unavailable"};
    co_await refuse(std::move(e));
    co_return;
  }
  const bool initialize = peek_.kind == JsonRpcPeek::Kind::kRequest && peek_.method == "initialize";
  if (std::optional<McpRefusal> bad =
          wrapSession(r, instance, initialize ? agreedVersion(response) : std::string(), headers)) {
    co_await refuse(std::move(*bad));
    co_return;
  }
  if (!plain_) {  // a full MCP client: the stream as it came, from its start
    co_await deliverStream(r, std::move(headers), parser, std::move(events));
    co_return;
  }
  if (response.empty()) {
    McpRefusal e{502, kRpcInternalError,
                 "MCP server '" + route_->name + "' ended its stream without answering.",
                 "upstream_unavailable"};
    co_await refuse(std::move(e));
    co_return;
  }
  headers.set("content-type", "application/json");
  headers.remove("cache-control");
  headers.remove("x-accel-buffering");
  status_ = 200;
  net::ResponseHead head;
  head.status = 200;
  head.headers = std::move(headers);
  co_await sink_.respond(std::move(head), std::move(response));
}

// Relays an SSE body as it arrives, whole events only: an event over the
// server's cap ends the stream with an error event of its own, never glued to
// a partial one. `alreadyRead` (events gathered before) goes out first;
// `parser` may hold the start of the next event.
net::Task<void> McpExchange::deliverStream(upstream::ResponseStream& r, Headers headers,
                                           sse::Parser& parser, std::string alreadyRead) {
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
  if (!alreadyRead.empty()) {
    const bool written = co_await sink_.write(alreadyRead);  // a statement: GCC 12 and &&
    if (!written) co_return;
  }
  // Registered with the worker while open, so that the end of a drain can
  // abort it (the caller then resumes on another gateway).
  struct Registration {
    Worker& worker;
    upstream::ResponseStream* stream;
    ~Registration() { worker.streamEnded(stream); }
  } registration{worker_, &r};
  worker_.streamStarted(&r);
  std::string chunk;
  chunk.reserve(16 * 1024);
  for (;;) {
    chunk.clear();
    bool more = co_await r.read(chunk);
    parser.consume();  // written by the previous round
    parser.feed(chunk);
    if (parser.parse() != sse::ParseStatus::kOk) {
      countLimit(Limit::kSseEventBytes);
      std::string error = "event: message\ndata: ";
      error += jsonRpcErrorBody(peek_.idJson.empty() ? "null" : peek_.idJson, kRpcInternalError,
                                "MCP server '" + route_->name + "' sent an event larger than " +
                                    std::to_string(responseCap()) +
                                    " bytes (mcp.servers[].max_response_bytes); the stream was "
                                    "ended");
      error += "\n\n";
      if (co_await sink_.write(error)) co_await sink_.finish();
      co_return;
    }
    std::string_view whole = parser.completeBytes();
    if (!whole.empty()) {
      const bool written = co_await sink_.write(whole);  // a statement: GCC 12 and &&
      if (!written) co_return;                           // caller gone
    }
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

}  // namespace relay::pipeline
