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

#include "relay/common/trace_context.hpp"
#include "relay/pipeline/chat.hpp"
#include "relay/sse/usage.hpp"

namespace relay::pipeline {

using SteadyClock = std::chrono::steady_clock;

class ChatRecord {
 public:
  ChatRecord(const Snapshot& snapshot, const net::Exchange& exchange, std::string requestId,
             SteadyClock::time_point start);
  ~ChatRecord();
  ChatRecord(const ChatRecord&) = delete;
  ChatRecord& operator=(const ChatRecord&) = delete;

  const std::string& requestId() const { return requestId_; }
  // The request's W3C trace: the caller's continued, or a new one; the
  // gateway's own span (trace_context.hpp).
  const TraceContext& trace() const { return trace_; }
  // The caller's X-Node-Id as sent (at most 64 bytes), for events.
  std::string_view nodeHeader() const;

  // Filled as the exchange goes.
  ChatPlan* plan = nullptr;                           // set once planChat() ran
  int status = 0;                                     // sent to the caller; 0 = none yet
  std::string errorCode;                              // OpenAI code of an error answer
  std::optional<std::size_t> upstream;                // the upstream that answered
  const upstream::ModelRoute* servedRoute = nullptr;  // set when a fallback model answered
  unsigned attempts = 0;
  std::int64_t upstreamUs = -1;      // final attempt: request sent -> response head
  std::optional<sse::Usage> usage;   // as the upstream reported it
  std::uint64_t outputEstimate = 0;  // completion tokens counted when usage is missing

  void firstByteSent();  // time to first token of a stream
  // Time spent waiting on the upstream or on the caller's window, excluded
  // from the gateway's own overhead.
  void addWait(SteadyClock::duration d) { waited_ += d; }
  // Tokens the caller has received so far (for a stream cut short).
  void producedSoFar(std::uint64_t completionTokens);

  // Idempotent; the destructor calls it.
  void settle();

 private:
  void firstByteEvent() const;
  void publishFinished(const telemetry::RequestRecord& r,
                       const telemetry::Settlement& settled) const;

  const Snapshot& snapshot_;
  const net::Exchange& exchange_;
  std::string requestId_;
  TraceContext trace_;
  SteadyClock::time_point start_;
  std::optional<SteadyClock::time_point> firstByte_;
  SteadyClock::duration waited_{};
  bool settled_ = false;
};

}  // namespace relay::pipeline
