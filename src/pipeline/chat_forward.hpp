// Forwarding a chat request: pick an upstream, send, and on failure retry,
// fail over and fall back — only while nothing has been sent to the caller.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "chat_record.hpp"
#include "final_answer.hpp"
#include "relay/pipeline/events.hpp"
#include "relay/pipeline/worker.hpp"
#include "relay/upstream/client.hpp"
#include "relay/upstream/pick.hpp"
#include "relay/upstream/retry_planner.hpp"
#include "relay/upstream/upstream_state.hpp"

namespace relay::pipeline {

struct Forwarded {
  // Success: a 2xx head whose body is still to be read. The lease holds the
  // upstream's concurrency slot until the body is done.
  std::unique_ptr<upstream::ResponseStream> response;
  std::optional<upstream::Lease> lease;
  std::size_t upstream = 0;
  const upstream::ModelRoute* route = nullptr;  // the model that answered
  std::optional<ErrorAnswer> error;             // set when there is no response
  bool answeredBy = false;  // error: an upstream's own answer (`upstream` says which)
  // How the answering upstream was chosen (x-relay-route, events).
  config::Strategy strategy = config::Strategy::kWeighted;
  double score = 0;
  bool explored = false;
};

// Waits until a point in time (a backoff, room at a full upstream); throws
// when the caller leaves. Tests inject one that returns at once.
using SleepUntil = std::function<net::Task<void>(SteadyClock::time_point)>;

struct ForwardRequest {
  // The pool of the snapshot the exchange started with (a fake in unit tests).
  upstream::UpstreamClient& clients;
  const net::Exchange& exchange;
  ChatPlan& plan;
  ChatRecord& record;
  unsigned hops = 0;  // x-relay-hops of the caller: another relay's attempts count
  SteadyClock::time_point start;
  SleepUntil sleepUntil;  // empty: an Asio timer on the caller's executor
};

// One request's forwarding: the attempts, retries, failover and fallback
// models until an upstream answers or none can. It lives in the caller's
// coroutine frame and run() is its one coroutine (one frame per request for
// all of it). `req` must outlive it.
class Forwarder {
 public:
  Forwarder(Worker& worker, const Snapshot& snap, ForwardRequest& req);

  // Forwards the request (once): the answer, or the error to give.
  net::Task<Forwarded> run();

 private:
  // False when the request may not go upstream at all (a relay loop):
  // result_ holds the refusal. Otherwise lists the model asked for and its
  // fallbacks the key may use.
  bool start();

  // Whether model `m` (0: the one asked for, then its fallbacks) is tried:
  // there is one, and attempts and time are left. A fallback is reported as
  // it begins. The constructor's clock reading serves the first model:
  // start() and the first attempt's pass follow it with no wait in between.
  bool beginModel(std::size_t m);

  // No model answered: the error to give.
  void finish();

  bool allFailed(const upstream::ModelRoute& route) const;

  // Data residency: the upstreams of `route` outside the regions the key
  // (keys[].regions) and the model (routes.MODEL.regions) allow are barred
  // for it — retries, failover and fallback models included.
  void barOutsideRegions(const upstream::ModelRoute& route);

  bool exhausted(SteadyClock::time_point now) const;

  Forwarded fail(ErrorAnswer e);

  // An attempt is about to go to upstream `u`: counted, and reported as a
  // retry (against the upstream that failed, not the one retried), a
  // failover when it changes upstream within the same model, and routed.
  void countAttempt(const upstream::ModelRoute& route, std::size_t u);

  // What follows the failed attempt `last`: the retry planner's decision,
  // except for a refused gateway credential — another upstream may hold a
  // good key, so go there at once (still within max_attempts and the retry
  // budget, which pick() draws from).
  upstream::RetryDecision planRetry(const Tried& last) const;

  void publishRetry(const Tried& last, const upstream::RetryDecision& d) const;

  enum class AttemptEnd { kAnswered, kFailed, kBodyPending };

  // What an attempt's head (or its failure) decides, without waiting. A 2xx
  // head is success (kAnswered, in result_); anything else is recorded in
  // tried_ and reported to the upstream's health (kFailed), but for an error
  // answer whose body is not here yet (kBodyPending: the caller reads it
  // into `body` and calls failAttempt()).
  AttemptEnd endAttempt(const upstream::ModelRoute& route, upstream::Lease& lease,
                        std::unique_ptr<upstream::ResponseStream>& resp,
                        const upstream::Failure& failure, SteadyClock::time_point sent,
                        std::string& body);

  // A failed attempt into tried_: no head (`resp` null: `failure` says why,
  // at `headAt`) or an error answer with its `body`. Its lease is released.
  void failAttempt(const upstream::ModelRoute& route, upstream::Lease& lease,
                   const upstream::ResponseStream* resp, const upstream::Failure& failure,
                   SteadyClock::time_point headAt, std::string body);

  // The request as upstream `info` gets it: the body with its model id, its
  // own credential, the headers every attempt shares.
  upstream::OutgoingRequest outgoingRequest(const upstream::UpstreamInfo& info,
                                            const upstream::Candidate& candidate);

  upstream::Deadlines attemptDeadlines() const;

  // The attempt's time to a head: waited time in the record, and what
  // least_latency learns — the first-byte time, or the first-byte timeout for
  // an attempt that failed to answer.
  void timeAttempt(std::size_t u, bool gotHead, const upstream::Failure& failure,
                   SteadyClock::time_point sent, SteadyClock::time_point headAt);

  // Success: the 2xx head, with the lease that holds the upstream's slot,
  // written where run() returns it from (not moved through each
  // coroutine's return on the way up).
  void answered(const upstream::ModelRoute& route, std::unique_ptr<upstream::ResponseStream> resp,
                upstream::Lease lease);

  // No head: a connect error, timeout, reset or protocol error.
  void noteTransportFailure(Tried& tried, const upstream::Failure& failure, upstream::Lease& lease,
                            SteadyClock::time_point at);

  // A head with an error status: the gateway's own credential refused, or an
  // upstream error kept (OpenAI-shaped) to pass on if nothing succeeds.
  void noteErrorResponse(Tried& tried, const upstream::ResponseStream& resp, std::string body,
                         const upstream::UpstreamInfo& info, upstream::Lease& lease,
                         upstream::UpstreamState& state);

  // This attempt ejected its upstream: the metric and the event.
  void reportEjection(const upstream::UpstreamInfo& info, const Tried& tried);

  void reportHealth(std::size_t u, SteadyClock::time_point now);

  // An event of this request (its id, key and node).
  RelayEvent event(std::string_view kind) const;

  net::Task<void> sleepUntil(SteadyClock::time_point when);

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

// Sets upstream `u`'s health gauge from its tracker, and publishes
// upstream.restored when it comes back from an ejection.
// `now`: a clock reading just taken.
void reportUpstreamHealth(const Snapshot& snapshot, std::size_t u, SteadyClock::time_point now);

}  // namespace relay::pipeline
