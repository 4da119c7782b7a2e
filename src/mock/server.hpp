// The mock upstream's request handler, written on the protocol-neutral seam so
// that the same code answers over HTTP/1.1 and HTTP/2.
//
// Routes: /v1/models, /v1/chat/completions (authenticated when --api-key is
// set, subject to faults, counted and recorded) and /_mock/* (introspection and
// fault control for tests: never authenticated, faulted, counted or recorded).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "fault.hpp"
#include "options.hpp"
#include "relay/net/exchange.hpp"
#include "replies.hpp"
#include "state.hpp"

namespace relay::mock {

// How a /v1 exchange ended, for the stats.
enum class Outcome {
  kAnswered,         // a whole response was sent
  kStreamCompleted,  // an SSE stream ran to `data: [DONE]` and finished
  kClientGone,       // the client left first (counts as cancelled)
  kAborted,          // the mock reset the exchange on purpose (fault)
};

class MockServer {
 public:
  // Both must outlive the server.
  MockServer(const MockOptions& options, MockState& state);

  net::Task<void> handle(net::Exchange& exchange);

 private:
  net::Task<void> control(net::Exchange& exchange);
  net::Task<Outcome> api(net::Exchange& exchange, std::uint64_t sequence);
  net::Task<Outcome> faultBody(net::Exchange& exchange, std::uint32_t bytes, bool chunked);
  net::Task<Outcome> faultStatus(net::Exchange& exchange, const FaultSpec& fault);
  // chat.cpp
  net::Task<Outcome> embeddings(net::Exchange& exchange);
  net::Task<Outcome> chatCompletions(net::Exchange& exchange, const FaultSpec& fault,
                                     std::uint64_t sequence);
  net::Task<Outcome> streamCompletion(net::Exchange& exchange, const CompletionPlan& plan,
                                      bool includeUsage, std::uint32_t delayMs,
                                      const FaultSpec& fault);

  // Status, content type, x-mock-name and the echoed x-request-id.
  net::ResponseHead makeHead(const net::Exchange& exchange, int status,
                             std::string_view contentType) const;
  net::Task<Outcome> reply(net::Exchange& exchange, int status, std::string body);
  net::Task<Outcome> replyError(net::Exchange& exchange, int status, std::string message,
                                std::string param = {});
  // The head and the first half of `body`, then a reset (reset_after on a
  // response that is not a stream).
  net::Task<Outcome> replyTruncated(net::Exchange& exchange, net::ResponseHead head,
                                    std::string body);
  void recordRequest(const net::Exchange& exchange);

  const MockOptions& options_;
  MockState& state_;
  std::string modelsBody_;  // canned at start-up
};

}  // namespace relay::mock
