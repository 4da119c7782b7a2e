// POST /v1/chat/completions.
#pragma once

#include <optional>

#include "relay/common/chat_request.hpp"
#include "relay/net/exchange.hpp"
#include "relay/pipeline/respond.hpp"
#include "relay/pipeline/worker.hpp"

namespace relay::pipeline {

// What the checks before forwarding established about a chat request.
struct ChatPlan {
  const admission::Tenant* tenant = nullptr;
  ChatRequestFields fields;
  const upstream::ModelRoute* route = nullptr;
};

// Authenticates, validates the body, resolves the model and checks the key's
// allow-list — everything decided before an upstream is involved. Returns the
// error to answer, or nullopt with `plan` filled. Plain code, no I/O.
std::optional<ApiError> planChat(const Snapshot& snapshot, const net::Exchange& exchange,
                                 ChatPlan& plan);

net::Task<void> handleChatCompletions(Worker& worker, net::Exchange& exchange);

}  // namespace relay::pipeline
