// POST /v1/chat/completions and /v1/embeddings: plan (authenticate, validate, route, admit) ->
// forward (retries, failover, fallback) -> deliver (JSON or SSE) -> settle.
// Written once against the net seam: it never knows which HTTP version the
// caller speaks.
#include "relay/pipeline/chat.hpp"

#include <charconv>
#include <cstdio>
#include <optional>

#include "chat_forward.hpp"
#include "chat_record.hpp"
#include "relay/common/json_write.hpp"
#include "relay/common/limits.hpp"
#include "relay/common/request_id.hpp"
#include "relay/pipeline/steps.hpp"
#include "relay/pipeline/stream_transform.hpp"
#include "relay/sse/usage.hpp"
#include "relay/sse/writer.hpp"

namespace relay::pipeline {
namespace {

unsigned hopsOf(const Headers& headers) {
  std::string_view v = headers.get("x-relay-hops");
  unsigned hops = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), hops);
  return ec == std::errc() && end == v.data() + v.size() ? hops : 0;
}

void addOutcomeHeaders(Headers& h, const Forwarded& f, const ChatRecord& record,
                       const Snapshot& snap) {
  h.add("x-relay-attempts", std::to_string(record.upstreamSide().attempts));
  if (f.response || f.answeredBy) {
    const std::string& region = snap.catalog.upstreams()[f.upstream].config->region;
    if (!region.empty()) h.add("x-relay-region", region);
  }
  if (f.response && snap.config.routing.debugHeader) {
    // Why this upstream (routing.debug_header; off by default).
    char score[32];
    std::snprintf(score, sizeof score, "%.3f", f.score);
    h.add("x-relay-route", std::string("strategy=") +
                               std::string(upstream::strategyName(f.strategy)) +
                               "; upstream=" + snap.catalog.upstreams()[f.upstream].name +
                               "; score=" + score + (f.explored ? "; explored" : ""));
  }
  if (f.response) {
    h.add("x-relay-upstream", snap.catalog.upstreams()[f.upstream].name);
    if (f.route != record.plan()->route) h.add("x-relay-fallback-model", f.route->model);
    if (const std::optional<std::string_view> id = f.response->headers().find("x-request-id"))
      h.add("x-upstream-request-id", *id);
  } else if (f.answeredBy) {
    h.add("x-relay-upstream", snap.catalog.upstreams()[f.upstream].name);
  }
}

// A JSON answer read whole (`ok`) or whose read failed, made ready to pass
// on: the upstream's slot freed, usage recorded, the record settled, and
// `head` to give with the body; on failure the 502 to give instead (the
// record then only notes it: the caller settles it after the answer).
std::optional<ApiError> settleJson(Forwarded& f, bool ok, const std::string& body, Headers& headers,
                                   ChatRecord& record, const upstream::UpstreamInfo& upstream,
                                   net::ResponseHead& head) {
  // The upstream is done with this request: its slot is free for the next
  // one, even while the write to a slow caller still waits for room.
  if (f.lease) f.lease->release();
  if (!ok) {
    // Nothing was sent yet, so this is still an honest status.
    ApiError err{502,
                 "upstream '" + upstream.name + "' failed while sending its answer: " +
                     upstream::describe(f.response->failure()),
                 "server_error", "upstream_unavailable"};
    err.traceId = record.trace().traceId;
    record.answered(502, err.code);
    return err;
  }
  if (auto usage = sse::extractBodyUsage(body))
    record.reported(*usage);
  else
    record.estimatedOutput(body.size() / 4);
  head.status = f.response->status();
  head.headers = std::move(headers);
  std::string_view type = f.response->headers().get("content-type");
  head.headers.add("content-type", type.empty() ? "application/json" : type);
  record.answered(head.status);
  // Settled before the caller can see the answer: its next request must find
  // this one's tokens and spend already counted (it may land on another worker).
  record.settle();
  return std::nullopt;
}

// Reads a JSON answer whose body did not all come with its head, and passes
// it on. (One that did, nearly every one, is passed on by
// handleModelRequest itself, with no coroutine of its own.)
net::Task<void> deliverJson(net::ResponseSink& sink, Forwarded& f, Headers headers,
                            ChatRecord& record, const upstream::UpstreamInfo& upstream) {
  std::string body;
  const auto t0 = SteadyClock::now();
  const bool ok = co_await f.response->readAll(body, upstream.config->maxResponseBytes);
  record.addWait(SteadyClock::now() - t0);
  net::ResponseHead head;
  if (std::optional<ApiError> err = settleJson(f, ok, body, headers, record, upstream, head)) {
    co_await respondError(sink, std::move(headers), std::move(*err));
    co_return;
  }
  co_await sink.respond(std::move(head), std::move(body));
}

// Relays an SSE answer event by event. From the first byte on, the caller has
// a 200: a failure is reported inside the stream, never by a silent cut.
// Registers a relayed stream with its worker for as long as it is open.
class OpenStream {
 public:
  OpenStream(Worker& worker, upstream::ResponseStream* stream) : worker_(worker), stream_(stream) {
    worker_.streamStarted(stream_);
  }
  ~OpenStream() { worker_.streamEnded(stream_); }
  OpenStream(const OpenStream&) = delete;
  OpenStream& operator=(const OpenStream&) = delete;

 private:
  Worker& worker_;
  upstream::ResponseStream* stream_;
};

// The head of a relayed stream: the upstream's content type and ours, and
// `headers` (moved from).
net::ResponseHead streamHead(const Forwarded& f, Headers& headers) {
  net::ResponseHead head;
  head.status = f.response->status();
  head.headers = std::move(headers);
  std::string_view type = f.response->headers().get("content-type");
  head.headers.add("content-type", type.empty() ? "text/event-stream" : type);
  head.headers.add("cache-control", "no-cache");
  head.headers.add("x-accel-buffering", "no");
  head.withFirstBytes = true;  // the first events follow: one write, not two
  return head;
}

// Why a relayed stream ended early, for the caller's last event ("" when
// it did not: the upstream said all it would).
std::string streamEndReason(Worker& worker, const Forwarded& f, const StreamTransform& transform,
                            const Snapshot& snap) {
  const upstream::UpstreamInfo& info = snap.catalog.upstreams()[f.upstream];
  if (worker.shuttingDown() && f.response->failure())
    return "the gateway is shutting down and its drain time ran out; the stream was ended early";
  if (f.response->failure())
    return "upstream '" + info.name +
           "' failed mid-stream: " + upstream::describe(f.response->failure());
  if (transform.failed()) {
    countLimit(Limit::kSseEventBytes);
    return "upstream '" + info.name + "' sent an event larger than " +
           std::to_string(info.config->maxEventBytes) +
           " bytes (upstreams[].max_event_bytes); the stream was ended";
  }
  if (transform.pendingBytes() > 0)
    return "upstream '" + info.name + "' ended the stream in the middle of an event";
  return {};
}

// What lives across this coroutine's waits is its frame, one per open
// stream (1,233 bytes as built on 2026-12-05): the head and the end's reason
// are made by the plain functions above, so that their locals are not in
// it. 40 bytes more put it over the allocator's 1,280-byte size class, and
// bench/streams.sh measured 1.5 KiB more RSS per HTTP/1.1 stream
// (docs/benchmarks.md).
net::Task<void> deliverStream(Worker& worker, net::ResponseSink& sink, Forwarded& f,
                              Headers headers, ChatRecord& record, const Snapshot& snap,
                              bool callerWantsUsage) {
  record.answered(f.response->status());
  if (!co_await sink.start(streamHead(f, headers))) co_return;

  OpenStream registered(worker, f.response.get());
  StreamTransform transform(callerWantsUsage,
                            snap.catalog.upstreams()[f.upstream].config->maxEventBytes);
  // The bytes of the upstream's last read, held back so that they leave with
  // the end of the stream in one write.
  std::string_view last;
  bool more = true;
  // When the wait for the next read began. Two clock readings per event: as
  // its read ends and as its write ends (which also starts the upstream's
  // idle deadline for the next read); a third when the write must wait
  // (always on TLS and HTTP/2, whose sinks write nothing at once; on plain
  // HTTP/1.1 when the caller's socket is full), so that a slow caller's
  // pace stays out of the gateway's overhead. A send the socket takes at
  // once is the gateway's own time, as the parsing is.
  auto r0 = SteadyClock::now();
  while (more) {
    // The body bytes go straight into the SSE parser's buffer, which grows
    // to about the largest read (no reservation: an open stream that carries
    // one small event a second should not hold a 16 KiB buffer).
    std::string& in = transform.inbox();
    // read() in steps: a stream that waits for every event costs no frame
    // per event for the wait.
    std::optional<bool> got = f.response->readNow(in);
    while (!got) {
      net::Task<upstream::ResponseStream::ReadWait> wait = f.response->waitMore(in, r0);
      const upstream::ResponseStream::ReadWait read = co_await std::move(wait);
      got = f.response->readAfter(read, in);
      if (!got) {
        // Bytes came, but no body byte (a chunk's size line on its own):
        // the upstream was not silent, so its idle deadline starts again.
        const auto t = SteadyClock::now();
        record.addWait(t - r0);
        r0 = t;
      }
    }
    more = *got;
    record.addWait(SteadyClock::now() - r0);
    std::string_view out = transform.pushInbox();
    if (transform.failed()) break;
    if (out.empty()) {
      r0 = SteadyClock::now();  // the push above was ours, not a wait
      continue;
    }
    record.firstByteSent();
    record.producedSoFar(transform.events());
    if (more && f.response->complete()) {
      last = out;  // valid until the next inbox(): there is none
      break;
    }
    bool written = false;
    if (std::optional<bool> now = sink.writeNow(out)) {
      written = *now;
      r0 = SteadyClock::now();
    } else {
      const auto w0 = SteadyClock::now();  // from here, the caller's pace, not ours
      written = co_await sink.write(out);
      r0 = SteadyClock::now();
      record.addWait(r0 - w0);
    }
    if (!written) co_return;  // caller gone: the upstream request is dropped with `f`
  }
  // The upstream has said all it will: its slot is free before the last
  // bytes reach the caller (see settleJson). One cut off mid-stream (an
  // event over max_event_bytes) may still be sending: it keeps its slot
  // until its connection is dropped with `f`.
  if (f.lease && (!more || f.response->complete())) f.lease->release();
  if (transform.usage()) record.reported(*transform.usage());
  std::string why = streamEndReason(worker, f, transform, snap);
  if (sink.clientGone() || f.response->failure().kind == upstream::FailureKind::kCancelled) {
    co_return;  // the caller left: not the upstream's failure, and nobody to tell
  }
  if (!why.empty()) {
    if (!worker.shuttingDown())
      (*snap.upstreamStates)[f.upstream].health().noteLateFailure(SteadyClock::now());
    record.endedWithError("upstream_stream_interrupted");
  }
  // Settled before the stream's end reaches the caller (see settleJson).
  record.settle();
  if (why.empty()) {
    co_await sink.finishWith(last);  // the held bytes, not a copy of them
    co_return;
  }
  std::string tail(last);
  sse::appendError(tail, why, "server_error", "upstream_stream_interrupted",
                   record.trace().traceId);
  co_await sink.finishWith(tail);
}

// What a body read left to answer: an error (413, 408, 400, 503, with the key's
// rate-limit fields) or nullopt; nullopt with the caller gone too.
std::optional<ApiError> bodyRefusal(net::BodyResult body, KeyGate& gate, const Snapshot& snap,
                                    const admission::Tenant& tenant, Headers& responseHeaders) {
  if (body.ok() || body.status == net::BodyStatus::kGone) return std::nullopt;
  gate.appendRateHeaders(snap, tenant, responseHeaders);
  const int status = body.httpStatus();
  return ApiError{status, std::move(body.message),
                  status >= 500 ? "server_error" : "invalid_request_error",
                  std::string(body.code())};
}

// Reads the body of an authenticated caller (the one that did not come with
// its head; readBodyNow() takes that one without a coroutine).
net::Task<std::optional<ApiError>> readBody(net::Exchange& ex, KeyGate& gate, const Snapshot& snap,
                                            const admission::Tenant& tenant,
                                            Headers& responseHeaders) {
  net::BodyResult body = co_await ex.readBody();
  co_return bodyRefusal(std::move(body), gate, snap, tenant, responseHeaders);
}

// An admission's answer into the plan (its ticket, why it was refused) and
// the answer's x-ratelimit-* fields: the refusal, if any.
std::optional<ApiError> takeAdmission(GateResult admitted, ChatPlan& plan, Headers& base) {
  admitted.rateHeaders.appendTo(base);
  plan.ticket = std::move(admitted.ticket);
  plan.refusal = admitted.reason;
  return std::move(admitted.refusal);
}

// The gate's answer when it has one without waiting (the local gate): true,
// with `refused` set when refused. False: admitLater(). Plain functions, so
// that a GateResult (560 bytes) is never in handleModelRequest's frame,
// which every open stream keeps.
bool admitNow(KeyGate& gate, const Snapshot& snap, ChatPlan& plan, Headers& base,
              std::optional<ApiError>& refused) {
  std::optional<GateResult> admitted = gate.admitNow(snap, plan.ask);
  if (!admitted) return false;
  refused = takeAdmission(std::move(*admitted), plan, base);
  return true;
}

net::Task<std::optional<ApiError>> admitLater(KeyGate& gate, const Snapshot& snap, ChatPlan& plan,
                                              Headers& base) {
  GateResult admitted = co_await gate.admit(snap, plan.ask);
  co_return takeAdmission(std::move(admitted), plan, base);
}

// request.rate_limited or budget.exceeded, for the event stream.
void publishRefusal(const Snapshot& snap, const ChatRecord& record, const ChatPlan& plan,
                    const ApiError& refused) {
  if (!snap.eventsWanted() || !plan.tenant) return;
  if (*plan.refusal == telemetry::RefusalReason::kSharedState) return;  // not the key's limit
  RelayEvent e;
  describeRefusal(e, *plan.refusal, refused);
  e.requestId = record.requestId();
  e.traceId = record.trace().traceId;
  e.key = plan.tenant->name;
  e.node = record.nodeHeader();
  e.model = plan.fields.model;
  snap.publish(e);
}

}  // namespace

// Not coroutines themselves: the handler's own coroutine is all there is.
net::Task<void> handleChatCompletions(Worker& worker, net::Exchange& ex) {
  return handleModelRequest(worker, ex, ModelApi::kChat);
}

net::Task<void> handleEmbeddings(Worker& worker, net::Exchange& ex) {
  return handleModelRequest(worker, ex, ModelApi::kEmbeddings);
}

net::Task<void> handleModelRequest(Worker& worker, net::Exchange& ex, ModelApi api) {
  // From the session's reading when the head was whole (no clock read here).
  const auto start =
      ex.head.receivedAt != SteadyClock::time_point{} ? ex.head.receivedAt : SteadyClock::now();
  // Taken together, before any suspension, and kept: they match each other
  // even if a reload swaps the worker's.
  std::shared_ptr<const Snapshot> snapshot = worker.snapshotPtr();
  std::shared_ptr<upstream::ClientPool> clients = worker.clientsPtr();
  const Snapshot& snap = *snapshot;
  net::ResponseSink& sink = *ex.response;
  telemetry::Metrics::InFlight inFlight(snap.metrics);
  ChatPlan plan;  // declared before the record, which settles against it when destroyed
  plan.api = api;
  ChatRecord record(snap, ex, requestIdFrom(ex.head.headers.get("x-request-id")), start);

  Headers base;
  base.reserve(16);  // request id, trace, 6 rate-limit fields, the relay's own: no regrowth
  base.add("x-request-id", record.requestId());
  // The caller learns the trace (and the gateway's span in it) from every
  // answer, also when it sent no traceparent (docs/tracing.md).
  base.add("traceparent", record.traceparent());

  // The key is checked on the head: a caller with a bad key is refused
  // before a byte of its body is read.
  KeyGate& gate = worker.gate();
  std::optional<ApiError> refused = authenticate(snap.keys, ex.head.headers, plan.tenant);
  if (!refused) {
    // The body that came with the head (most requests) is there already: no
    // coroutine for it.
    if (std::optional<net::BodyResult> now = ex.readBodyNow()) {
      refused = bodyRefusal(std::move(*now), gate, snap, *plan.tenant, base);
    } else {
      refused = co_await readBody(ex, gate, snap, *plan.tenant, base);
    }
  }
  if (!refused && !ex.response->clientGone()) {
    refused = planChat(snap, ex, plan);
    if (refused) {
      gate.appendRateHeaders(snap, *plan.tenant, base);
    } else {
      // The local gate decides at once; the shared one may wait for Redis.
      if (!admitNow(gate, snap, plan, base, refused))
        refused = co_await admitLater(gate, snap, plan, base);
    }
  }
  record.planned(plan);
  if (ex.response->clientGone()) co_return;
  if (refused) {
    record.answered(refused->status, refused->code);
    refused->traceId = record.trace().traceId;
    if (plan.refusal) {
      snap.telemetry->refusal(*plan.refusal);
      publishRefusal(snap, record, plan, *refused);
    }
    // Written without a coroutine when the socket takes it (a hot key's
    // 429s): see respondNow().
    net::ResponseHead head;
    std::string body;
    errorAnswer(std::move(base), std::move(*refused), head, body);
    if (!sink.respondNow(head, body).has_value())
      co_await sink.respond(std::move(head), std::move(body));
    co_return;
  }

  ForwardRequest forward{*clients, ex, plan, record, hopsOf(ex.head.headers), start};
  Forwarded f;
  {
    // In this frame, not one of its own; gone (its strings, the rewritten
    // body, the failed attempts) before the answer is relayed.
    Forwarder forwarder(worker, snap, forward);
    net::Task<Forwarded> run = forwarder.run();  // a named local: GCC 12 and co_await temporaries
    f = co_await std::move(run);
  }
  addOutcomeHeaders(base, f, record, snap);
  if (!f.response) {
    if (sink.clientGone()) co_return;
    ErrorAnswer& e = *f.error;
    if (f.answeredBy) record.answeredBy(f.upstream);
    record.answered(e.status, e.code);
    for (const HeaderField& h : e.headers)
      base.add(h.name, h.value);
    addTraceIdToError(e.body, record.trace().traceId);
    co_await respondJson(sink, e.status, std::move(base), std::move(e.body));
    co_return;
  }
  record.answeredBy(f.upstream, f.route);
  if (plan.fields.stream) {
    co_await deliverStream(worker, sink, f, std::move(base), record, snap,
                           plan.fields.includeUsage.value_or(false));
  } else {
    const upstream::UpstreamInfo& info = snap.catalog.upstreams()[f.upstream];
    std::string body;
    // The whole answer has nearly always come with its head: taken at once,
    // with no wait to time (and no clock read), and passed on from here.
    if (std::optional<bool> ready = f.response->readAllNow(body, info.config->maxResponseBytes)) {
      net::ResponseHead head;
      std::optional<ApiError> err = settleJson(f, *ready, body, base, record, info, head);
      if (err) {
        co_await respondError(sink, std::move(base), std::move(*err));
      } else if (!sink.respondNow(head, body).has_value()) {
        co_await sink.respond(std::move(head), std::move(body));
      }
    } else {
      co_await deliverJson(sink, f, std::move(base), record, info);
    }
  }
  if (f.lease) f.lease->release();
  record.settle();
}

}  // namespace relay::pipeline
