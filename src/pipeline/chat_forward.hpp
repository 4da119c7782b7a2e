// Forwarding a chat request: pick an upstream, send, and on failure retry,
// fail over and fall back — only while nothing has been sent to the caller.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "chat_record.hpp"
#include "final_answer.hpp"
#include "relay/pipeline/worker.hpp"
#include "relay/upstream/client.hpp"
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

net::Task<Forwarded> forwardChat(Worker& worker, const Snapshot& snapshot, ForwardRequest request);

// Sets upstream `u`'s health gauge from its tracker, and publishes
// upstream.restored when it comes back from an ejection.
// `now`: a clock reading just taken.
void reportUpstreamHealth(const Snapshot& snapshot, std::size_t u, SteadyClock::time_point now);

}  // namespace relay::pipeline
