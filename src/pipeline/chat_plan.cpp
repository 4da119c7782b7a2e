// The checks made before any upstream is involved (chat.hpp: planChat).
#include <algorithm>

#include "relay/admission/token_estimate.hpp"
#include "relay/pipeline/chat.hpp"
#include "relay/pipeline/steps.hpp"
#include "relay/telemetry/cost.hpp"

namespace relay::pipeline {
namespace {

// The models a caller may use, comma separated, for error messages.
std::string modelsFor(const Snapshot& snap, const admission::Tenant& tenant) {
  std::string out;
  for (const auto& route : snap.catalog.routes()) {
    if (!tenant.mayUse(route.model)) continue;
    if (!out.empty()) out += ", ";
    out += route.model;
  }
  return out.empty() ? "(none)" : out;
}

std::optional<ApiError> checkRequest(const Snapshot& snap, const net::Exchange& ex, ChatPlan& plan);
void askFor(const Snapshot& snap, ChatPlan& plan);

}  // namespace

std::optional<ApiError> planChat(const Snapshot& snap, const net::Exchange& ex, ChatPlan& plan) {
  if (!plan.tenant) {
    if (auto err = authenticate(snap.keys, ex.head.headers, plan.tenant)) return err;
  }
  if (auto err = checkRequest(snap, ex, plan)) return err;
  askFor(snap, plan);
  return std::nullopt;
}

namespace {

std::optional<ApiError> checkRequest(const Snapshot& snap, const net::Exchange& ex,
                                     ChatPlan& plan) {
  const admission::Tenant& tenant = *plan.tenant;
  std::optional<ChatRequestError> bad =
      plan.api == ModelApi::kEmbeddings ? readEmbeddingsRequest(ex.body, plan.fields, plan.tokenIds)
                                        : readChatRequest(ex.body, plan.fields);
  if (bad)
    return ApiError{400, std::move(bad->message), "invalid_request_error", "",
                    std::move(bad->param)};
  const std::string& model = plan.fields.model;
  plan.route = snap.catalog.route(model);
  if (!plan.route) {
    return ApiError{404,
                    "The model '" + model + "' does not exist or you do not have access to it. " +
                        "Available models: " + modelsFor(snap, tenant) + ".",
                    "invalid_request_error", "model_not_found", "model"};
  }
  if (!tenant.mayUse(model)) {
    return ApiError{403,
                    "The key '" + tenant.name + "' may not use the model '" + model +
                        "'. Allowed models: " + modelsFor(snap, tenant) + ".",
                    "invalid_request_error", "model_not_allowed", "model"};
  }
  return std::nullopt;
}

// The tokens to reserve (prompt estimate plus the completion cap) and the
// most the request can cost: the budget holds that much while it runs, so
// parallel requests cannot all slip under a nearly spent cap.
void askFor(const Snapshot& snap, ChatPlan& plan) {
  const ChatRequestFields& f = plan.fields;
  std::uint64_t reserve = 0;
  if (plan.api == ModelApi::kEmbeddings) {
    // The input's tokens, nothing to complete.
    plan.promptEstimate =
        (f.messageTextBytes + admission::kBytesPerToken - 1) / admission::kBytesPerToken +
        plan.tokenIds;
    reserve = plan.promptEstimate;
  } else {
    plan.promptEstimate = admission::estimatePromptTokens(f.messageTextBytes);
    reserve = admission::reservationFor(plan.promptEstimate, f.maxTokens, f.maxCompletionTokens,
                                        snap.config.defaultMaxTokens);
  }
  const std::uint64_t completionCap = reserve - std::min(reserve, plan.promptEstimate);
  const telemetry::Price& worst = snap.worstPrices[plan.route->index];
  telemetry::Cost maxCost =
      telemetry::costOf(worst, telemetry::Usage{static_cast<std::int64_t>(plan.promptEstimate), 0,
                                                static_cast<std::int64_t>(completionCap)});
  plan.ask.tenant = plan.tenant;
  plan.ask.tokens = reserve;
  plan.ask.budget =
      admission::BudgetAsk{static_cast<admission::NanoUsd>((maxCost.picoUsd + 999) / 1000),
                           plan.promptEstimate, completionCap};
}

}  // namespace

}  // namespace relay::pipeline
