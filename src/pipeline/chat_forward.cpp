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

std::string joinRegions(const std::vector<std::string>& regions) {
  std::string out;
  for (const std::string& r : regions)
    out += (out.empty() ? "" : ", ") + r;
  return out;
}

// A one-off balancer for a route the worker has none for (a reload raced
// this request): plain weights, no shared state.
upstream::Balancer fallbackFor(const upstream::ModelRoute& route) {
  std::vector<std::uint32_t> weights;
  for (const auto& c : route.candidates)
    weights.push_back(c.weight);
  return upstream::Balancer(config::Strategy::kWeighted, std::move(weights), route.upstreams, 0,
                            nullptr, nullptr, randomBits());
}

}  // namespace

Forwarder::Forwarder(Worker& worker, const Snapshot& snap, ForwardRequest& req)
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

// The model asked for, then each fallback the key may use while attempts
// and time are left; on each, attempts on its upstreams until one answers,
// retrying and failing over as the retry planner says. All of it in this
// one coroutine: each layer that only called the next cost a frame.
net::Task<Forwarded> Forwarder::run() {
  if (!start()) co_return std::move(result_);
  upstream::UpstreamStates& states = *snap_.upstreamStates;
  bool done = false;
  for (std::size_t m = 0; !done && beginModel(m); ++m) {
    // Attempts on this model's upstreams, until one answers (done) or they
    // are exhausted. With a fallback model left, a model whose every
    // upstream has already failed in this request is given up: its fallback
    // is the better bet than the same upstreams again.
    const upstream::ModelRoute& route = *models_[m];
    const bool fallbackLeft = m + 1 < models_.size();
    barOutsideRegions(route);
    // One clock reading per pass, for the deadline and the pick; the
    // constructor's serves the first model's first pass.
    for (auto now = m == 0 ? constructedAt_ : SteadyClock::now(); !exhausted(now);
         now = SteadyClock::now()) {
      if (fallbackLeft && allFailed(route)) break;
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
        break;  // next fallback model, if any
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
      if (answered) {
        done = true;
        break;
      }
      if (giveUp_ || tried_.empty() || req_.exchange.response->clientGone()) {
        giveUp_ = true;
        break;
      }
      const Tried& last = tried_.back();
      const upstream::RetryDecision d = planRetry(last);
      if (!d.retry()) {
        giveUp_ = true;
        break;
      }
      publishRetry(last, d);
      if (d.action == upstream::RetryAction::kRetryElsewhere) {
        history_.exclude(last.index);
      } else if (d.delay.count() > 0) {
        co_await sleepUntil(SteadyClock::now() + d.delay);
      }
    }
  }
  if (!done) finish();
  co_return std::move(result_);
}

bool Forwarder::start() {
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

bool Forwarder::beginModel(std::size_t m) {
  if (m >= models_.size() || exhausted(m == 0 ? constructedAt_ : SteadyClock::now())) return false;
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

void Forwarder::finish() {
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

bool Forwarder::allFailed(const upstream::ModelRoute& route) const {
  for (std::size_t u : route.upstreams) {
    if (!history_.tried(u) && !history_.excluded(u)) return false;
  }
  return true;
}

void Forwarder::barOutsideRegions(const upstream::ModelRoute& route) {
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

bool Forwarder::exhausted(SteadyClock::time_point now) const {
  return giveUp_ || history_.attempts() >= maxAttempts_ || now >= deadline_;
}

Forwarded Forwarder::fail(ErrorAnswer e) {
  Forwarded f;
  f.error = std::move(e);
  return f;
}

void Forwarder::countAttempt(const upstream::ModelRoute& route, std::size_t u) {
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

upstream::RetryDecision Forwarder::planRetry(const Tried& last) const {
  upstream::RetryDecision d;
  if (last.credentialRefused) {
    if (history_.attempts() < maxAttempts_) d.action = upstream::RetryAction::kRetryElsewhere;
    return d;
  }
  return snap_.planner.plan(last.failure, history_.attempts(), SteadyClock::now(), deadline_,
                            randomBits());
}

void Forwarder::publishRetry(const Tried& last, const upstream::RetryDecision& d) const {
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

Forwarder::AttemptEnd Forwarder::endAttempt(const upstream::ModelRoute& route,
                                            upstream::Lease& lease,
                                            std::unique_ptr<upstream::ResponseStream>& resp,
                                            const upstream::Failure& failure,
                                            SteadyClock::time_point sent, std::string& body) {
  const std::size_t u = lease.upstream;
  auto headAt = SteadyClock::now();
  timeAttempt(u, resp != nullptr, failure, sent, headAt);

  if (!resp && (failure.kind == FailureKind::kCancelled || req_.exchange.response->clientGone())) {
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

void Forwarder::failAttempt(const upstream::ModelRoute& route, upstream::Lease& lease,
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

upstream::OutgoingRequest Forwarder::outgoingRequest(const upstream::UpstreamInfo& info,
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

upstream::Deadlines Forwarder::attemptDeadlines() const {
  upstream::Deadlines d;
  const auto& t = snap_.config.timeouts;
  d.connect = std::chrono::milliseconds(t.connectMs);
  d.firstByte = std::chrono::milliseconds(t.firstByteMs);
  d.idle = std::chrono::milliseconds(t.idleMs);
  d.total = deadline_;
  return d;
}

void Forwarder::timeAttempt(std::size_t u, bool gotHead, const upstream::Failure& failure,
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

void Forwarder::answered(const upstream::ModelRoute& route,
                         std::unique_ptr<upstream::ResponseStream> resp, upstream::Lease lease) {
  Forwarded& f = result_;
  f.upstream = lease.upstream;
  f.response = std::move(resp);
  f.lease = std::move(lease);
  f.route = &route;
  f.strategy = lastStrategy_;
  f.score = lastScore_;
  f.explored = lastExplored_;
}

void Forwarder::noteTransportFailure(Tried& tried, const upstream::Failure& failure,
                                     upstream::Lease& lease, SteadyClock::time_point at) {
  auto cls = upstream::failureClassFromName(upstream::failureClass(failure.kind));
  tried.failure = AttemptFailure{cls.value_or(FailureClass::kConnectError), 0, std::nullopt, true};
  tried.transport = failure.kind;
  tried.what = upstream::describe(failure);
  // A request that ran out of total time says nothing about the upstream.
  lease.report(failure.kind == FailureKind::kTotalTimeout ? upstream::HealthVerdict::kNeutral
                                                          : upstream::healthVerdict(tried.failure),
               at);
}

void Forwarder::noteErrorResponse(Tried& tried, const upstream::ResponseStream& resp,
                                  std::string body, const upstream::UpstreamInfo& info,
                                  upstream::Lease& lease, upstream::UpstreamState& state) {
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

void Forwarder::reportEjection(const upstream::UpstreamInfo& info, const Tried& tried) {
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

void Forwarder::reportHealth(std::size_t u, SteadyClock::time_point now) {
  reportUpstreamHealth(snap_, u, now);
}

RelayEvent Forwarder::event(std::string_view kind) const {
  RelayEvent e;
  e.kind = kind;
  e.requestId = req_.record.requestId();
  e.traceId = req_.record.trace().traceId;
  e.key = req_.plan.tenant->name;
  e.node = req_.record.nodeHeader();
  return e;
}

net::Task<void> Forwarder::sleepUntil(SteadyClock::time_point when) {
  auto start = SteadyClock::now();
  if (req_.sleepUntil) {
    net::Task<void> wait = req_.sleepUntil(when);  // a named local: GCC 12 and co_await temporaries
    co_await std::move(wait);
  } else {
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, when);
    co_await timer.async_wait(boost::asio::use_awaitable);  // throws if the caller left
  }
  req_.record.addWait(SteadyClock::now() - start);
}

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

}  // namespace relay::pipeline
