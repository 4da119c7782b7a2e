// POST /v1/chat/completions.
#pragma once

#include <cstdint>
#include <optional>

#include "relay/admission/budget.hpp"
#include "relay/admission/key_limiter.hpp"
#include "relay/common/chat_request.hpp"
#include "relay/net/exchange.hpp"
#include "relay/pipeline/respond.hpp"
#include "relay/pipeline/snapshot.hpp"
#include "relay/pipeline/worker.hpp"
#include "relay/telemetry/record.hpp"

namespace relay::pipeline {

// The OpenAI endpoints that take a model and go to an upstream.
enum class ModelApi { kChat, kEmbeddings };

// What the checks before forwarding established about a chat (or embeddings)
// request.
struct ChatPlan {
  ModelApi api = ModelApi::kChat;
  std::size_t tokenIds = 0;  // embeddings: token ids given directly in `input`
  const admission::Tenant* tenant = nullptr;
  ChatRequestFields fields;
  const upstream::ModelRoute* route = nullptr;
  std::uint64_t promptEstimate = 0;    // tokens, from the message text (token_estimate.hpp)
  admission::Reservation reservation;  // tokens and a concurrency slot, settled at the end
  admission::BudgetHold budgetHold;    // the most this request may cost, settled to the real cost
  std::optional<telemetry::RefusalReason> refusal;  // why admission said no, for metrics
};

// Everything decided before an upstream is involved, in this order:
// authenticate (unless `plan.tenant` is already set), validate the body
// (which the caller has read), resolve the model, check the key's
// allow-list, check its budget, take from its buckets. Returns the error to
// answer, or nullopt with `plan` filled. Once the caller is known, its
// x-ratelimit-* fields are added to `responseHeaders` (every response to an
// authenticated caller carries them, refusals included). No I/O.
std::optional<ApiError> planChat(const Snapshot& snapshot, const net::Exchange& exchange,
                                 ChatPlan& plan, Headers& responseHeaders);

net::Task<void> handleChatCompletions(Worker& worker, net::Exchange& exchange);

// POST /v1/embeddings: the same path (authentication, admission with the
// input's tokens, routing, retries, metrics and cost), never streamed.
net::Task<void> handleEmbeddings(Worker& worker, net::Exchange& exchange);
net::Task<void> handleModelRequest(Worker& worker, net::Exchange& exchange, ModelApi api);

}  // namespace relay::pipeline
