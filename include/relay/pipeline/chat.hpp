// POST /v1/chat/completions.
#pragma once

#include <cstdint>
#include <optional>

#include <memory>

#include "relay/common/chat_request.hpp"
#include "relay/net/exchange.hpp"
#include "relay/pipeline/key_gate.hpp"
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
  std::uint64_t promptEstimate = 0;  // tokens, from the message text (token_estimate.hpp)
  GateAsk ask;                       // what admission is asked for (set by planChat)
  // The key's hold (tokens, a concurrency slot, the most this request may
  // cost), settled with the real usage at the end.
  std::unique_ptr<GateTicket> ticket;
  std::optional<telemetry::RefusalReason> refusal;  // why admission said no, for metrics
};

// Everything decided before admission, in this order: authenticate (unless
// `plan.tenant` is already set), validate the body (which the caller has
// read), resolve the model, check the key's allow-list, and work out what
// the request asks of its key (`plan.ask`: its token reservation and the
// most it can cost at the dearest price of its route). Returns the error to
// answer, or nullopt with `plan` filled. No I/O; admission itself is the
// key gate's (key_gate.hpp).
std::optional<ApiError> planChat(const Snapshot& snapshot, const net::Exchange& exchange,
                                 ChatPlan& plan);

net::Task<void> handleChatCompletions(Worker& worker, net::Exchange& exchange);

// POST /v1/embeddings: the same path (authentication, admission with the
// input's tokens, routing, retries, metrics and cost), never streamed.
net::Task<void> handleEmbeddings(Worker& worker, net::Exchange& exchange);
net::Task<void> handleModelRequest(Worker& worker, net::Exchange& exchange, ModelApi api);

}  // namespace relay::pipeline
