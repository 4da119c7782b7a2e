// POST /v1/chat/completions: authenticate -> validate -> route -> forward ->
// stream back. The pipeline is written once against the net seam; it never
// knows which HTTP version the caller speaks.
#include "relay/pipeline/chat.hpp"

#include "relay/admission/token_estimate.hpp"
#include "relay/common/chat_request.hpp"
#include "relay/common/json_write.hpp"
#include "relay/common/request_id.hpp"
#include "relay/pipeline/steps.hpp"
#include "relay/pipeline/stream_transform.hpp"
#include "relay/pipeline/upstream_error.hpp"
#include "relay/sse/writer.hpp"

namespace relay::pipeline {
namespace {

using upstream::Failure;
using upstream::FailureKind;

// The models a caller may use, comma separated, for error messages.
std::string modelsFor(const Snapshot& snap, const admission::Tenant& tenant) {
  std::string out;
  for (const auto& route : snap.catalog.routes()) {
    if (!tenant.mayUse(route.model)) continue;
    if (!out.empty()) out += ", ";
    out += route.model;
  }
  return out.empty() ? "(none)" : out;
}

upstream::Deadlines deadlinesFrom(const config::Timeouts& t, upstream::Clock::time_point start) {
  upstream::Deadlines d;
  d.connect = std::chrono::milliseconds(t.connectMs);
  d.firstByte = std::chrono::milliseconds(t.firstByteMs);
  d.idle = std::chrono::milliseconds(t.idleMs);
  d.total = start + std::chrono::milliseconds(t.totalMs);
  return d;
}

ApiError failureError(const std::string& upstreamName, const Failure& failure) {
  ApiError e;
  bool timeout = upstream::failureClass(failure.kind) == "timeout";
  e.status = timeout ? 504 : 502;
  e.type = "server_error";
  e.code = timeout ? "upstream_timeout" : "upstream_unavailable";
  e.message = "upstream '" + upstreamName + "' failed: " + upstream::describe(failure);
  return e;
}

std::optional<ApiError> checkRequest(const Snapshot& snap, const net::Exchange& ex, ChatPlan& plan);
std::optional<ApiError> admit(const Snapshot& snap, admission::KeyLimiter& limiter, ChatPlan& plan);

}  // namespace

std::optional<ApiError> planChat(const Snapshot& snap, const net::Exchange& ex, ChatPlan& plan,
                                 Headers& responseHeaders) {
  if (auto err = authenticate(snap.keys, ex.head.headers, plan.tenant)) return err;
  const admission::Tenant& tenant = *plan.tenant;
  admission::KeyLimiter& limiter = *snap.limiters[tenant.index];
  std::optional<ApiError> err = checkRequest(snap, ex, plan);
  if (!err) err = admit(snap, limiter, plan);
  limiter.headers(admission::SystemClock::instance().steadyNow()).appendTo(responseHeaders);
  return err;
}

namespace {

std::optional<ApiError> checkRequest(const Snapshot& snap, const net::Exchange& ex, ChatPlan& plan) {
  const admission::Tenant& tenant = *plan.tenant;
  if (auto bad = readChatRequest(ex.body, plan.fields))
    return ApiError{400, std::move(bad->message), "invalid_request_error", "", std::move(bad->param)};
  const std::string& model = plan.fields.model;
  plan.route = snap.catalog.route(model);
  if (!plan.route) {
    return ApiError{404,
                    "The model '" + model + "' does not exist or you do not have access to it. " +
                        "Available models: " + modelsFor(snap, tenant) + ".",
                    "invalid_request_error", "model_not_found", "model"};
  }
  if (!tenant.mayUse(model)) {
    return ApiError{403,
                    "The key '" + tenant.name + "' may not use the model '" + model +
                        "'. Allowed models: " + modelsFor(snap, tenant) + ".",
                    "invalid_request_error", "model_not_allowed", "model"};
  }
  return std::nullopt;
}

std::optional<ApiError> admit(const Snapshot& snap, admission::KeyLimiter& limiter,
                              ChatPlan& plan) {
  const auto& clock = admission::SystemClock::instance();
  admission::Budget& budget = snap.budgets->budget(plan.tenant->index);
  if (std::optional<admission::BudgetRefusal> spent = budget.check(clock.wallNow())) {
    ApiError e{429, std::move(spent->message), "insufficient_quota", "insufficient_quota"};
    e.headers.add("x-should-retry", "false");  // waiting for a retry cannot refill a budget
    return e;
  }
  const ChatRequestFields& f = plan.fields;
  plan.promptEstimate = admission::estimatePromptTokens(f.messageTextBytes);
  std::uint64_t reserve =
      admission::reservationFor(plan.promptEstimate, f.maxTokens, f.maxCompletionTokens,
                                snap.config.defaultMaxTokens);
  admission::AdmitResult admitted = limiter.admit(reserve, clock.steadyNow());
  if (!admitted) {
    const admission::Refusal& r = admitted.refusal();
    ApiError e{429, r.message, std::string(r.errorType()), "rate_limit_exceeded"};
    r.appendHeaders(e.headers);
    return e;
  }
  plan.reservation = std::move(admitted.reservation());
  return std::nullopt;
}

}  // namespace

net::Task<void> handleChatCompletions(Worker& worker, net::Exchange& ex) {
  const auto start = upstream::Clock::now();
  std::shared_ptr<const Snapshot> snapshot = worker.snapshotPtr();  // stays valid through a reload
  const Snapshot& snap = *snapshot;
  net::ResponseSink& sink = *ex.response;

  Headers base;
  base.add("x-request-id", requestIdFrom(ex.head.headers.get("x-request-id")));

  ChatPlan plan;
  if (std::optional<ApiError> err = planChat(snap, ex, plan, base)) {
    co_await respondError(sink, std::move(base), std::move(*err));
    co_return;
  }
  const ChatRequestFields& fields = plan.fields;
  const upstream::ModelRoute* route = plan.route;

  int pick = worker.selector(route->index).pick();
  const upstream::Candidate& candidate = route->candidates.at(static_cast<std::size_t>(pick));
  const upstream::UpstreamInfo& target = snap.catalog.upstreams()[candidate.upstream];

  std::string forwardBody;
  rewriteChatRequest(ex.body, fields, ChatRewrite{candidate.upstreamModel, true}, forwardBody);

  upstream::OutgoingRequest req;
  req.method = "POST";
  req.path = target.target.path("/chat/completions");
  req.headers = forwardableHeaders(ex.head.headers);
  req.headers.set("authorization", target.authorization);
  req.headers.set("x-request-id", base.get("x-request-id"));
  req.headers.set("content-type", "application/json");  // the body was validated as JSON
  req.headers.add("accept-encoding", "identity");  // SSE is relayed as it comes
  req.body = forwardBody;

  base.add("x-relay-upstream", target.name);

  Failure failure;
  std::unique_ptr<upstream::ResponseStream> resp = co_await worker.clients().send(
      candidate.upstream, req, deadlinesFrom(snap.config.timeouts, start), failure);
  if (!resp) {
    ApiError err = failureError(target.name, failure);
    if (!sink.clientGone()) co_await respondError(sink, std::move(base), std::move(err));
    co_return;
  }

  if (resp->status() >= 400) {
    std::string body;
    if (!co_await resp->readAll(body)) {
      ApiError err = failureError(target.name, resp->failure());
      co_await respondError(sink, std::move(base), std::move(err));
      co_return;
    }
    UpstreamErrorView err = normaliseUpstreamError(target.name, resp->status(), body);
    for (const char* h : {"retry-after", "retry-after-ms"}) {
      if (const std::string* v = resp->headers().find(h)) base.add(h, *v);
    }
    if (!err.retryable) base.add("x-should-retry", "false");
    co_await respondJson(sink, resp->status(), std::move(base), std::move(err.body));
    co_return;
  }

  if (const std::string* up = resp->headers().find("x-request-id"))
    base.add("x-upstream-request-id", *up);

  if (!fields.stream) {
    std::string body;
    if (!co_await resp->readAll(body)) {
      ApiError err = failureError(target.name, resp->failure());
      co_await respondError(sink, std::move(base), std::move(err));
      co_return;
    }
    net::ResponseHead head;
    head.status = resp->status();
    head.headers = std::move(base);
    std::string_view type = resp->headers().get("content-type");
    head.headers.add("content-type", type.empty() ? "application/json" : type);
    co_await sink.respond(std::move(head), std::move(body));
    co_return;
  }

  // Streaming: from here on the caller has a 200 and every failure must be
  // reported inside the stream, never by cutting it short silently.
  net::ResponseHead head;
  head.status = resp->status();
  head.headers = std::move(base);
  std::string_view type = resp->headers().get("content-type");
  head.headers.add("content-type", type.empty() ? "text/event-stream" : type);
  head.headers.add("cache-control", "no-cache");
  head.headers.add("x-accel-buffering", "no");
  if (!co_await sink.start(std::move(head))) co_return;

  StreamTransform transform(fields.includeUsage.value_or(false));
  std::string chunk;
  chunk.reserve(16 * 1024);
  bool more = true;
  while (more) {
    chunk.clear();
    more = co_await resp->read(chunk);
    std::string_view out = transform.push(chunk);
    if (transform.failed()) break;
    if (!out.empty() && !co_await sink.write(out)) co_return;  // caller gone: drop upstream
  }
  std::string why;
  if (resp->failure()) {
    why = "upstream '" + target.name + "' failed mid-stream: " + upstream::describe(resp->failure());
  } else if (transform.failed()) {
    why = "upstream '" + target.name + "' sent an event larger than the gateway accepts";
  } else if (transform.pendingBytes() > 0) {
    why = "upstream '" + target.name + "' ended the stream in the middle of an event";
  }
  if (!why.empty()) {
    std::string event;
    sse::appendError(event, why, "server_error", "upstream_stream_interrupted");
    if (!co_await sink.write(event)) co_return;
  }
  co_await sink.finish();
}

}  // namespace relay::pipeline
