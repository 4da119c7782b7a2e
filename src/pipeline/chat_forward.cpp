// The retry loop. Invariant: nothing here writes to the caller — every retry,
// failover and fallback happens before the first byte of the answer leaves,
// so a retry can never duplicate or splice output.
#include "chat_forward.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <optional>
#include <random>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/container/small_vector.hpp>

#include "relay/common/head_writer.hpp"
#include "relay/pipeline/steps.hpp"
#include "relay/pipeline/upstream_error.hpp"
#include "relay/upstream/pick.hpp"
#include "relay/upstream/retry_after.hpp"

namespace relay::pipeline {
namespace {

using upstream::AttemptFailure;
using upstream::FailureClass;
using upstream::FailureKind;

// Relays chained deeper than this are a loop.
constexpr unsigned kMaxHops = 8;
// While every upstream is at its cap and no time of release is known, look again this often.
constexpr std::chrono::milliseconds kQueuePoll{10};

std::uint64_t randomBits() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

telemetry::UpstreamFailure telemetryReason(const AttemptFailure& f) {
  switch (f.kind) {
    case FailureClass::kConnectError:
      return telemetry::UpstreamFailure::kConnectError;
    case FailureClass::kTimeout:
      return telemetry::UpstreamFailure::kTimeout;
    case FailureClass::kReset:
      return telemetry::UpstreamFailure::kReset;
    case FailureClass::kProtocolError:
      return telemetry::UpstreamFailure::kOther;
    case FailureClass::kHttpStatus:
      if (f.status == 429) return telemetry::UpstreamFailure::kRateLimited;
      return f.status >= 500 ? telemetry::UpstreamFailure::kServerError
                             : telemetry::UpstreamFailure::kOther;
  }
  return telemetry::UpstreamFailure::kOther;
}

class Forwarder {
 public:
  Forwarder(Worker& worker, const Snapshot& snap, ForwardRequest& req)
      : worker_(worker), snap_(snap), req_(req), history_(snap.catalog.upstreams().size()) {
    const auto& t = snap.config.timeouts;
    deadline_ = req.start + std::chrono::milliseconds(t.totalMs);
    constructedAt_ = SteadyClock::now();
    queueDeadline_ = std::min(deadline_, constructedAt_ + std::chrono::milliseconds(t.queueMs));
    maxAttempts_ = req.hops > 0 ? 1 : snap.config.retry.maxAttempts;  // the outer relay retries
    // The fields every attempt sends, serialised once. The fields the
    // gateway sets itself replace any the caller sent.
    static constexpr std::string_view kOwn[] = {"x-forwarded-for", "x-request-id", "content-type",
                                                "accept-encoding", "x-relay-hops", "traceparent",
                                                "tracestate"};
    const Headers& in = req.exchange.head.headers;
    const TraceContext& trace = req.record.trace();
    const std::string forwardedForValue =
        forwardedFor(req.exchange.head, snap.config.server.trustedProxies);
    // The gateway's own fields' names, separators, the fixed values and the
    // trace parent fit in 256 bytes beside the parts counted (the writer
    // grows if not).
    HeadWriter w(forwardHead_, 256 + in.textBytes() + 4 * in.size() + forwardedForValue.size() +
                                   req.record.requestId().size() + trace.tracestate.size());
    for (const HeaderField& f : in) {
      if (forwardable(f.name, ForwardFor::kChat, snap.config.forwardHeaders) &&
          std::find(std::begin(kOwn), std::end(kOwn), f.name) == std::end(kOwn))
        w.field(f.name, f.value);
    }
    w.field("x-forwarded-for", forwardedForValue);
    w.field("x-request-id", req.record.requestId());
    w.field("content-type", "application/json");  // the body was validated
    w.field("accept-encoding", "identity");       // SSE is relayed as it comes
    char hops[24];
    const auto hopsEnd = std::to_chars(hops, hops + sizeof hops, req.hops + 1).ptr;
    w.field("x-relay-hops", std::string_view(hops, static_cast<std::size_t>(hopsEnd - hops)));
    // W3C Trace Context: the upstream's parent is the gateway's own span, never
    // the caller's (steps.cpp does not copy these fields).
    w.field("traceparent", req.record.traceparent());
    if (!trace.tracestate.empty()) w.field("tracestate", trace.tracestate);
  }

  // forwardChat() drives a Forwarder: start(), then for m = 0, 1, ... while
  // beginModel(m), tryModel(m) until one answers; finish() when none did.
  // (The loop is forwardChat's own coroutine, not one more of the
  // Forwarder's: one frame fewer per request.)

  // False when the request may not go upstream at all (a relay loop):
  // result() holds the refusal. Otherwise lists the model asked for and its
  // fallbacks the key may use.
  bool start() {
    if (req_.hops >= kMaxHops) {
      result_ = fail(gatewayError(508,
                                  "x-relay-hops is " + std::to_string(req_.hops) +
                                      ": the request has passed through too many relays, "
                                      "probably a loop in their upstream configuration",
                                  "server_error", "relay_loop_detected"));
      return false;
    }
    const upstream::ModelRoute* first = req_.plan.route;
    models_.assign(1, first);
    for (const upstream::ModelRoute* fb : snap_.fallbacks[first->index]) {
      if (req_.plan.tenant->mayUse(fb->model)) models_.push_back(fb);
    }
    return true;
  }

  // Whether model `m` (0: the one asked for, then its fallbacks) is tried:
  // there is one, and attempts and time are left. A fallback is reported as
  // it begins. The constructor's clock reading serves the first model:
  // start() and tryRoute()'s first pass follow it with no wait in between.
  bool beginModel(std::size_t m) {
    if (m >= models_.size() || exhausted(m == 0 ? constructedAt_ : SteadyClock::now()))
      return false;
    if (m > 0 && !tried_.empty()) {
      snap_.telemetry->fallback(static_cast<std::uint32_t>(tried_.back().index),
                                telemetry::FallbackKind::kModel,
                                telemetryReason(tried_.back().failure));
      if (snap_.eventsWanted()) {
        RelayEvent e = event("request.fallback_model");
        e.from = models_[m - 1]->model;
        e.to = models_[m]->model;
        e.reason = upstream::failureClassName(tried_.back().failure.kind);
        snap_.publish(e);
      }
    }
    return true;
  }

  // Attempts on model `m` (after beginModel(m)): true when one answered.
  net::Task<bool> tryModel(std::size_t m) {
    return tryRoute(*models_[m], m + 1 < models_.size(),
                    m == 0 ? std::optional(constructedAt_) : std::nullopt);
  }

  // No model answered: the error to give.
  void finish() {
    result_ = fail(finalAnswer(Unserved{.model = req_.plan.route->model,
                                        .tried = tried_,
                                        .residencyRule = residencyRule_,
                                        .full = full_,
                                        .fullRetryAt = fullRetryAt_,
                                        .budgetRefused = budgetRefused_},
                               SteadyClock::now()));
    if (!tried_.empty() && tried_.back().passthrough) result_.upstream = tried_.back().index;
    result_.answeredBy = !tried_.empty() && tried_.back().passthrough;
  }

  // The answer, or the error to give (moved out once, by forwardChat).
  Forwarded& result() { return result_; }

 private:
  bool allFailed(const upstream::ModelRoute& route) const {
    for (std::size_t u : route.upstreams) {
      if (!history_.tried(u) && !history_.excluded(u)) return false;
    }
    return true;
  }

  // Data residency: the upstreams of `route` outside the regions the key
  // (keys[].regions) and the model (routes.MODEL.regions) allow are barred
  // for it — retries, failover and fallback models included.
  void barOutsideRegions(const upstream::ModelRoute& route) {
    history_.clearBars();
    const std::vector<std::string>& keyRegions = req_.plan.tenant->config->regions;
    auto it = snap_.config.routes.find(route.model);
    const std::vector<std::string> none;
    const std::vector<std::string>& routeRegions =
        it != snap_.config.routes.end() ? it->second.regions : none;
    if (keyRegions.empty() && routeRegions.empty()) return;
    auto allows = [](const std::vector<std::string>& list, const std::string& region) {
      return list.empty() || std::find(list.begin(), list.end(), region) != list.end();
    };
    for (std::size_t u : route.upstreams) {
      const std::string& region = snap_.catalog.upstreams()[u].config->region;
      if (region.empty() || !allows(keyRegions, region) || !allows(routeRegions, region)) {
        history_.bar(u);
        if (residencyRule_.empty()) {
          residencyRule_ = !keyRegions.empty()
                               ? "key '" + req_.plan.tenant->name + "' is kept to regions " +
                                     joinRegions(keyRegions) + " (keys[].regions)"
                               : "model '" + route.model + "' is kept to regions " +
                                     joinRegions(routeRegions) + " (routes." + route.model +
                                     ".regions)";
        }
      }
    }
  }

  static std::string joinRegions(const std::vector<std::string>& regions) {
    std::string out;
    for (const std::string& r : regions)
      out += (out.empty() ? "" : ", ") + r;
    return out;
  }

  bool exhausted() const { return exhausted(SteadyClock::now()); }
  bool exhausted(SteadyClock::time_point now) const {
    return giveUp_ || history_.attempts() >= maxAttempts_ || now >= deadline_;
  }

  Forwarded fail(ErrorAnswer e) {
    Forwarded f;
    f.error = std::move(e);
    return f;
  }

  // Attempts on the upstreams of one model: true when one answered (in
  // result_), false when they are exhausted.
  // With a fallback model left, a model whose every upstream has already
  // failed in this request is given up: its fallback is the better bet than
  // the same upstreams again.
  // `firstNow`: a clock reading for the first pass, when the caller has one.
  net::Task<bool> tryRoute(const upstream::ModelRoute& route, bool fallbackLeft,
                           std::optional<SteadyClock::time_point> firstNow) {
    upstream::UpstreamStates& states = *snap_.upstreamStates;
    barOutsideRegions(route);
    // One clock reading per pass, for the deadline and the pick.
    for (auto now = firstNow ? *firstNow : SteadyClock::now(); !exhausted(now);
         now = SteadyClock::now()) {
      if (fallbackLeft && allFailed(route)) co_return false;
      upstream::Balancer* balancer = worker_.balancer(snap_, route.index);
      std::optional<upstream::Balancer> oneOff;
      if (!balancer) balancer = &oneOff.emplace(fallbackFor(route));
      upstream::PickResult pick = upstream::pickUpstream(states, *balancer, route.upstreams,
                                                         history_, history_.attempts() > 0, now);
      lastStrategy_ = balancer->strategy();
      lastScore_ = balancer->lastScore();
      lastExplored_ = balancer->lastExplored();
      if (!pick.lease) {
        if (pick.refusal == upstream::PickRefusal::kFull) {
          if (now < queueDeadline_) {  // wait for room, boundedly
            auto until = std::min(pick.retryAt.value_or(now + kQueuePoll), queueDeadline_);
            co_await sleepUntil(until);
            continue;
          }
          full_ = true;
          fullRetryAt_ = pick.retryAt;
          snap_.telemetry->refusal(telemetry::RefusalReason::kUpstreamCapacity);
        } else if (pick.refusal == upstream::PickRefusal::kBudget) {
          budgetRefused_ = true;
          snap_.telemetry->refusal(telemetry::RefusalReason::kRetryBudget);
        }
        co_return false;  // next fallback model, if any
      }
      // One request to one upstream, here rather than in a coroutine of its
      // own (one frame fewer per request). Its block ends before any retry
      // wait below: the lease (the upstream's slot) and a failed answer's
      // connection are given back first.
      bool answered = false;
      {
        upstream::Lease lease = std::move(*pick.lease);
        countAttempt(route, lease.upstream);
        const std::size_t u = lease.upstream;
        const upstream::UpstreamInfo& info = snap_.catalog.upstreams()[u];
        upstream::OutgoingRequest out = outgoingRequest(info, route.candidates[lease.candidate]);
        upstream::Deadlines deadlines = attemptDeadlines();  // named: no temporary in co_await
        upstream::Failure failure;
        deadlines.sentAt = SteadyClock::now();  // the pool's clock reading too
        std::unique_ptr<upstream::ResponseStream> resp =
            co_await req_.clients.send(u, out, deadlines, failure);
        std::string body;
        const AttemptEnd end = endAttempt(route, lease, resp, failure, deadlines.sentAt, body);
        if (end == AttemptEnd::kBodyPending) {
          // An error answer whose body did not come with its head.
          const bool read = co_await resp->readAll(body, info.config->maxResponseBytes);
          if (!read) body.clear();
          failAttempt(route, lease, resp.get(), failure, {}, std::move(body));
        }
        answered = end == AttemptEnd::kAnswered;
      }
      if (answered) co_return true;
      if (giveUp_ || tried_.empty() || req_.exchange.response->clientGone()) {
        giveUp_ = true;
        co_return false;
      }
      const Tried& last = tried_.back();
      const upstream::RetryDecision d = planRetry(last);
      if (!d.retry()) {
        giveUp_ = true;
        co_return false;
      }
      publishRetry(last, d);
      if (d.action == upstream::RetryAction::kRetryElsewhere) {
        history_.exclude(last.index);
      } else if (d.delay.count() > 0) {
        co_await sleepUntil(SteadyClock::now() + d.delay);
      }
    }
    co_return false;
  }

  // An attempt is about to go to upstream `u`: counted, and reported as a
  // retry (against the upstream that failed, not the one retried), a
  // failover when it changes upstream within the same model, and routed.
  void countAttempt(const upstream::ModelRoute& route, std::size_t u) {
    history_.recordAttempt(u);
    req_.record.attempted(history_.attempts());
    if (history_.attempts() > 1 && !tried_.empty()) {
      const Tried& failed = tried_.back();
      auto from = static_cast<std::uint32_t>(failed.index);
      snap_.telemetry->retry(from, telemetryReason(failed.failure));
      if (failed.index != u && failed.route == &route) {
        snap_.telemetry->fallback(from, telemetry::FallbackKind::kUpstream,
                                  telemetryReason(failed.failure));
        if (snap_.eventsWanted()) {
          RelayEvent e = event("request.failover");
          e.from = failed.upstream;
          e.to = snap_.catalog.upstreams()[u].name;
          e.reason = upstream::failureClassName(failed.failure.kind);
          e.message = failed.what;
          snap_.publish(e);
        }
      }
    }
    if (snap_.eventsWanted()) {
      RelayEvent e = event("request.routed");
      e.model = route.model;
      e.upstream = snap_.catalog.upstreams()[u].name;
      e.region = snap_.catalog.upstreams()[u].config->region;
      e.strategy = upstream::strategyName(lastStrategy_);
      e.score = lastScore_;
      if (lastExplored_) e.reason = "exploration";
      e.attempt = history_.attempts();
      snap_.publish(e);
    }
  }

  // What follows the failed attempt `last`: the retry planner's decision,
  // except for a refused gateway credential — another upstream may hold a
  // good key, so go there at once (still within max_attempts and the retry
  // budget, which pick() draws from).
  upstream::RetryDecision planRetry(const Tried& last) const {
    upstream::RetryDecision d;
    if (last.credentialRefused) {
      if (history_.attempts() < maxAttempts_) d.action = upstream::RetryAction::kRetryElsewhere;
      return d;
    }
    return snap_.planner.plan(last.failure, history_.attempts(), SteadyClock::now(), deadline_,
                              randomBits());
  }

  void publishRetry(const Tried& last, const upstream::RetryDecision& d) const {
    if (!snap_.eventsWanted()) return;
    RelayEvent e = event("request.retry");
    e.upstream = last.upstream;
    e.reason = upstream::failureClassName(last.failure.kind);
    if (last.failure.status) e.status = last.failure.status;
    e.message = last.what;
    e.attempt = history_.attempts();
    e.delayMs = d.action == upstream::RetryAction::kRetryElsewhere ? 0 : d.delay.count();
    snap_.publish(e);
  }

  enum class AttemptEnd { kAnswered, kFailed, kBodyPending };

  // What an attempt's head (or its failure) decides, without waiting. A 2xx
  // head is success (kAnswered, in result_); anything else is recorded in
  // tried_ and reported to the upstream's health (kFailed), but for an error
  // answer whose body is not here yet (kBodyPending: the caller reads it
  // into `body` and calls failAttempt()).
  AttemptEnd endAttempt(const upstream::ModelRoute& route, upstream::Lease& lease,
                        std::unique_ptr<upstream::ResponseStream>& resp,
                        const upstream::Failure& failure, SteadyClock::time_point sent,
                        std::string& body) {
    const std::size_t u = lease.upstream;
    auto headAt = SteadyClock::now();
    timeAttempt(u, resp != nullptr, failure, sent, headAt);

    if (!resp &&
        (failure.kind == FailureKind::kCancelled || req_.exchange.response->clientGone())) {
      // The caller left: nothing was learnt about the upstream (a probe is
      // handed back), and nobody is left to answer.
      lease.report(upstream::HealthVerdict::kNeutral, headAt);
      giveUp_ = true;
      return AttemptEnd::kFailed;
    }
    if (resp && resp->status() >= 200 && resp->status() < 300) {
      lease.report(upstream::HealthVerdict::kSuccess, headAt);
      snap_.telemetry->attempt(static_cast<std::uint32_t>(u), false);
      reportHealth(u, headAt);
      answered(route, std::move(resp), std::move(lease));
      return AttemptEnd::kAnswered;
    }
    if (!resp) {
      snap_.telemetry->attempt(static_cast<std::uint32_t>(u),
                               failure.kind != FailureKind::kTotalTimeout);
    } else {
      const int status = resp->status();
      snap_.telemetry->attempt(static_cast<std::uint32_t>(u),
                               status >= 500 || status == 429 || status == 401 || status == 403);
      // An error answer is small and has nearly always come with its head.
      const std::uint64_t limit = snap_.catalog.upstreams()[u].config->maxResponseBytes;
      const std::optional<bool> read = resp->readAllNow(body, limit);
      if (!read) return AttemptEnd::kBodyPending;
      if (!*read) body.clear();
    }
    failAttempt(route, lease, resp.get(), failure, headAt, std::move(body));
    return AttemptEnd::kFailed;
  }

  // A failed attempt into tried_: no head (`resp` null: `failure` says why,
  // at `headAt`) or an error answer with its `body`. Its lease is released.
  void failAttempt(const upstream::ModelRoute& route, upstream::Lease& lease,
                   const upstream::ResponseStream* resp, const upstream::Failure& failure,
                   SteadyClock::time_point headAt, std::string body) {
    const std::size_t u = lease.upstream;
    const upstream::UpstreamInfo& info = snap_.catalog.upstreams()[u];
    upstream::UpstreamState& state = (*snap_.upstreamStates)[u];
    const std::uint64_t ejectionsBefore = state.health().ejectionsTotal();
    Tried tried;
    tried.index = u;
    tried.route = &route;
    tried.upstream = info.name;
    if (!resp) {
      noteTransportFailure(tried, failure, lease, headAt);
    } else {
      noteErrorResponse(tried, *resp, std::move(body), info, lease, state);
    }
    lease.release();
    if (state.health().ejectionsTotal() > ejectionsBefore) reportEjection(info, tried);
    reportHealth(u, SteadyClock::now());
    tried_.push_back(std::move(tried));
  }

  // The request as upstream `info` gets it: the body with its model id, its
  // own credential, the headers every attempt shares.
  upstream::OutgoingRequest outgoingRequest(const upstream::UpstreamInfo& info,
                                            const upstream::Candidate& candidate) {
    body_.clear();
    rewriteChatRequest(req_.exchange.body, req_.plan.fields,
                       ChatRewrite{candidate.upstreamModel, true}, body_);
    upstream::OutgoingRequest out;
    out.method = "POST";
    out.path = req_.plan.api == ModelApi::kEmbeddings ? info.embeddingsPath : info.chatPath;
    out.sharedHead = forwardHead_;
    out.authorization = info.authorization;
    out.body = body_;
    return out;
  }

  upstream::Deadlines attemptDeadlines() const {
    upstream::Deadlines d;
    const auto& t = snap_.config.timeouts;
    d.connect = std::chrono::milliseconds(t.connectMs);
    d.firstByte = std::chrono::milliseconds(t.firstByteMs);
    d.idle = std::chrono::milliseconds(t.idleMs);
    d.total = deadline_;
    return d;
  }

  // The attempt's time to a head: waited time in the record, and what
  // least_latency learns — the first-byte time, or the first-byte timeout for
  // an attempt that failed to answer.
  void timeAttempt(std::size_t u, bool gotHead, const upstream::Failure& failure,
                   SteadyClock::time_point sent, SteadyClock::time_point headAt) {
    req_.record.addWait(headAt - sent);
    if (gotHead) {
      worker_.observeLatency(
          snap_, u, std::chrono::duration<double, std::milli>(headAt - sent).count(), headAt);
    } else if (failure.kind != FailureKind::kCancelled) {
      worker_.observeLatency(snap_, u, static_cast<double>(snap_.config.timeouts.firstByteMs),
                             headAt);
    }
    req_.record.headAfter(
        std::chrono::duration_cast<std::chrono::microseconds>(headAt - sent).count());
  }

  // Success: the 2xx head, with the lease that holds the upstream's slot,
  // written where forwardChat takes it from (not moved through each
  // coroutine's return on the way up).
  void answered(const upstream::ModelRoute& route, std::unique_ptr<upstream::ResponseStream> resp,
                upstream::Lease lease) {
    Forwarded& f = result_;
    f.upstream = lease.upstream;
    f.response = std::move(resp);
    f.lease = std::move(lease);
    f.route = &route;
    f.strategy = lastStrategy_;
    f.score = lastScore_;
    f.explored = lastExplored_;
  }

  // No head: a connect error, timeout, reset or protocol error.
  void noteTransportFailure(Tried& tried, const upstream::Failure& failure, upstream::Lease& lease,
                            SteadyClock::time_point at) {
    auto cls = upstream::failureClassFromName(upstream::failureClass(failure.kind));
    tried.failure =
        AttemptFailure{cls.value_or(FailureClass::kConnectError), 0, std::nullopt, true};
    tried.transport = failure.kind;
    tried.what = upstream::describe(failure);
    // A request that ran out of total time says nothing about the upstream.
    lease.report(failure.kind == FailureKind::kTotalTimeout
                     ? upstream::HealthVerdict::kNeutral
                     : upstream::healthVerdict(tried.failure),
                 at);
  }

  // A head with an error status: the gateway's own credential refused, or an
  // upstream error kept (OpenAI-shaped) to pass on if nothing succeeds.
  void noteErrorResponse(Tried& tried, const upstream::ResponseStream& resp, std::string body,
                         const upstream::UpstreamInfo& info, upstream::Lease& lease,
                         upstream::UpstreamState& state) {
    const int status = resp.status();
    UpstreamErrorView view = normaliseUpstreamError(info.name, status, body, info.config->apiKey);
    if (refusedGatewayCredential(status, view)) {
      // The gateway's key for this upstream is wrong, not the caller's:
      // never pass that on (the SDK would blame the caller's own key, and
      // the provider's words may quote ours). Eject it and try another.
      tried.failure = AttemptFailure{FailureClass::kHttpStatus, status, std::nullopt, true};
      tried.credentialRefused = true;
      tried.what = "HTTP " + std::to_string(status) + ", the gateway's credential was refused";
      auto now = SteadyClock::now();
      lease.report(upstream::HealthVerdict::kFailure, now);
      state.health().ejectNow(now);
      return;
    }
    const Headers& h = resp.headers();
    bool upstreamSaysNo = h.get("x-should-retry") == "false";
    tried.failure =
        AttemptFailure{FailureClass::kHttpStatus, status,
                       upstream::upstreamRetryDelay(h.get("retry-after-ms"), h.get("retry-after"),
                                                    std::chrono::system_clock::now()),
                       view.retryable && !upstreamSaysNo};
    tried.what = "HTTP " + std::to_string(status);
    ErrorAnswer pass;
    pass.status = status;
    pass.body = std::move(view.body);
    pass.code = view.code;
    for (const char* name : {"retry-after", "retry-after-ms"}) {
      if (const std::optional<std::string_view> v = h.find(name)) pass.headers.add(name, *v);
    }
    if (!tried.failure.retryable) pass.headers.add("x-should-retry", "false");
    tried.passthrough = std::move(pass);
    lease.report(tried.failure, SteadyClock::now());
  }

  // This attempt ejected its upstream: the metric and the event.
  void reportEjection(const upstream::UpstreamInfo& info, const Tried& tried) {
    snap_.telemetry->ejection(static_cast<std::uint32_t>(tried.index),
                              tried.credentialRefused
                                  ? telemetry::EjectionReason::kCredentialRefused
                                  : telemetry::EjectionReason::kConsecutiveFailures);
    if (snap_.eventsWanted()) {
      RelayEvent e;
      e.kind = "upstream.ejected";
      e.traceId = req_.record.trace().traceId;  // the request that tipped it
      e.upstream = info.name;
      e.reason = tried.credentialRefused ? "credential_refused" : "consecutive_failures";
      e.message = tried.what;
      snap_.publish(e);
    }
  }

  void reportHealth(std::size_t u, SteadyClock::time_point now) {
    reportUpstreamHealth(snap_, u, now);
  }

  // An event of this request (its id, key and node).
  RelayEvent event(std::string_view kind) const {
    RelayEvent e;
    e.kind = kind;
    e.requestId = req_.record.requestId();
    e.traceId = req_.record.trace().traceId;
    e.key = req_.plan.tenant->name;
    e.node = req_.record.nodeHeader();
    return e;
  }

  // A one-off balancer for a route the worker has none for (a reload raced
  // this request): plain weights, no shared state.
  static upstream::Balancer fallbackFor(const upstream::ModelRoute& route) {
    std::vector<std::uint32_t> weights;
    for (const auto& c : route.candidates)
      weights.push_back(c.weight);
    return upstream::Balancer(config::Strategy::kWeighted, std::move(weights), route.upstreams, 0,
                              nullptr, nullptr, randomBits());
  }

  net::Task<void> sleepUntil(SteadyClock::time_point when) {
    auto start = SteadyClock::now();
    if (req_.sleepUntil) {
      net::Task<void> wait =
          req_.sleepUntil(when);  // a named local: GCC 12 and co_await temporaries
      co_await std::move(wait);
    } else {
      boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, when);
      co_await timer.async_wait(boost::asio::use_awaitable);  // throws if the caller left
    }
    req_.record.addWait(SteadyClock::now() - start);
  }

  Worker& worker_;
  const Snapshot& snap_;
  ForwardRequest& req_;
  upstream::AttemptHistory history_;
  std::string residencyRule_;  // set when residency barred some upstream
  config::Strategy lastStrategy_ = config::Strategy::kWeighted;
  double lastScore_ = 0;
  bool lastExplored_ = false;
  std::vector<Tried> tried_;
  std::string forwardHead_;  // field lines every attempt sends (OutgoingRequest::sharedHead)
  std::string body_;
  SteadyClock::time_point deadline_;
  SteadyClock::time_point queueDeadline_;
  SteadyClock::time_point constructedAt_;  // the constructor's clock reading
  std::optional<SteadyClock::time_point> fullRetryAt_;
  unsigned maxAttempts_ = 1;
  bool giveUp_ = false;
  bool full_ = false;
  bool budgetRefused_ = false;
  // The model asked for and its fallbacks (a few: no heap for them).
  boost::container::small_vector<const upstream::ModelRoute*, 4> models_;
  Forwarded result_;
};

}  // namespace

void reportUpstreamHealth(const Snapshot& snap, std::size_t u, SteadyClock::time_point at) {
  using upstream::HealthStatus;
  HealthStatus st = (*snap.upstreamStates)[u].health().status(at);
  telemetry::HealthState now = st == HealthStatus::kEjected    ? telemetry::HealthState::kEjected
                               : st == HealthStatus::kHalfOpen ? telemetry::HealthState::kHalfOpen
                                                               : telemetry::HealthState::kHealthy;
  telemetry::HealthState was = snap.telemetry->upstreamHealth(static_cast<std::uint32_t>(u), now);
  if (now == telemetry::HealthState::kHealthy && was != telemetry::HealthState::kHealthy &&
      snap.eventsWanted()) {
    RelayEvent e;
    e.kind = "upstream.restored";
    e.upstream = snap.catalog.upstreams()[u].name;
    snap.publish(e);
  }
}

net::Task<Forwarded> forwardChat(Worker& worker, const Snapshot& snapshot, ForwardRequest request) {
  Forwarder forwarder(worker, snapshot, request);
  if (forwarder.start()) {
    bool answered = false;
    for (std::size_t m = 0; !answered && forwarder.beginModel(m); ++m) {
      net::Task<bool> model =
          forwarder.tryModel(m);  // a named local: GCC 12 and co_await temporaries
      answered = co_await std::move(model);
    }
    if (!answered) forwarder.finish();
  }
  co_return std::move(forwarder.result());
}

}  // namespace relay::pipeline
