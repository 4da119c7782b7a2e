// What one chat exchange did, settled exactly once: when the handler finishes,
// or when its coroutine frame is destroyed after a cancellation (the caller
// left). Settling reconciles the key's token reservation with the real usage,
// charges the key's budget with the cost, and hands one record to telemetry
// (metrics and the access log). No secret ever reaches it: only names.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "relay/common/request_id.hpp"
#include "relay/common/trace_context.hpp"
#include "relay/pipeline/chat.hpp"
#include "relay/sse/usage.hpp"

namespace relay::pipeline {

using SteadyClock = std::chrono::steady_clock;

class ChatRecord {
 public:
  ChatRecord(const Snapshot& snapshot, const net::Exchange& exchange, const RequestId& requestId,
             SteadyClock::time_point start);
  ~ChatRecord();
  ChatRecord(const ChatRecord&) = delete;
  ChatRecord& operator=(const ChatRecord&) = delete;

  std::string_view requestId() const { return requestId_; }
  // The request's W3C trace: the caller's continued, or a new one; the
  // gateway's own span (trace_context.hpp).
  const TraceContext& trace() const { return trace_; }
  // trace().traceparent(), made once: the answer and every attempt carry it.
  std::string_view traceparent() const { return traceparent_; }
  // The caller's X-Node-Id as sent (at most 64 bytes), for events.
  std::string_view nodeHeader() const;

  // Each stage hands the record its own piece, through one call each; the
  // record is read only by settle() (and the few getters below).
  //
  // The request: what the caller asked and what admission decided (key,
  // route, estimates, ticket). Set once, by the handler, when planChat() ran.
  void planned(ChatPlan& plan) { plan_ = &plan; }
  const ChatPlan* plan() const { return plan_; }

  // The upstream side (the forwarder and the handler): attempts made, the
  // final attempt's time to a response head, and who answered with which
  // model (a fallback route when it differs from the plan's).
  struct UpstreamSide {
    unsigned attempts = 0;
    std::int64_t headUs = -1;  // final attempt: request sent -> response head
    std::optional<std::size_t> upstream;
    const upstream::ModelRoute* route = nullptr;
  };
  void attempted(unsigned attempts) { upstream_.attempts = attempts; }
  void headAfter(std::int64_t us) { upstream_.headUs = us; }
  void answeredBy(std::size_t upstream, const upstream::ModelRoute* route = nullptr) {
    upstream_.upstream = upstream;
    upstream_.route = route;
  }
  const UpstreamSide& upstreamSide() const { return upstream_; }

  // What the caller was answered: a status, and for an error (or a stream
  // ended by an error event) its OpenAI code.
  void answered(int status, std::string_view errorCode = {}) {
    status_ = status;
    errorCode_ = errorCode;
  }
  void endedWithError(std::string_view errorCode) { errorCode_ = errorCode; }

  // Tokens: as the upstream reported them, or counted while relaying when it
  // reports none (completion tokens only; the prompt estimate stands in).
  void reported(const sse::Usage& usage) { usage_ = usage; }
  void estimatedOutput(std::uint64_t completionTokens) { outputEstimate_ = completionTokens; }

  void firstByteSent();  // time to first token of a stream
  // Time spent waiting on the upstream or on the caller's window, excluded
  // from the gateway's own overhead.
  void addWait(SteadyClock::duration d) { waited_ += d; }
  // Tokens the caller has received so far (for a stream cut short): counted,
  // and the key's reservation told.
  void producedSoFar(std::uint64_t completionTokens);

  // Idempotent; the destructor calls it.
  void settle();

 private:
  void firstByteEvent() const;
  void publishFinished(const telemetry::RequestRecord& r,
                       const telemetry::Settlement& settled) const;

  telemetry::RequestRecord describe(SteadyClock::time_point now) const;
  void chargeKey(const telemetry::RequestRecord& r, const telemetry::Settlement& settled);

  const Snapshot& snapshot_;
  const net::Exchange& exchange_;
  RequestId requestId_;
  TraceContext trace_;
  InlineString<55> traceparent_;
  SteadyClock::time_point start_;
  std::optional<SteadyClock::time_point> firstByte_;
  SteadyClock::duration waited_{};
  ChatPlan* plan_ = nullptr;
  UpstreamSide upstream_;
  int status_ = 0;  // sent to the caller; 0 = none yet
  std::string errorCode_;
  std::optional<sse::Usage> usage_;
  std::uint64_t outputEstimate_ = 0;
  bool settled_ = false;
};

}  // namespace relay::pipeline
