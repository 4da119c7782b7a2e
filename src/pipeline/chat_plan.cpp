// The checks made before any upstream is involved (chat.hpp: planChat).
#include <algorithm>

#include "relay/admission/token_estimate.hpp"
#include "relay/telemetry/cost.hpp"
#include "relay/pipeline/chat.hpp"
#include "relay/pipeline/steps.hpp"

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
std::optional<ApiError> admit(const Snapshot& snap, admission::KeyLimiter& limiter, ChatPlan& plan);

}  // namespace

std::optional<ApiError> planChat(const Snapshot& snap, const net::Exchange& ex, ChatPlan& plan,
                                 Headers& responseHeaders) {
  if (!plan.tenant) {
    if (auto err = authenticate(snap.keys, ex.head.headers, plan.tenant)) return err;
  }
  const admission::Tenant& tenant = *plan.tenant;
  admission::KeyLimiter& limiter = *snap.limiters[tenant.index];
  std::optional<ApiError> err = checkRequest(snap, ex, plan);
  if (!err) err = admit(snap, limiter, plan);
  limiter.headers(admission::SystemClock::instance().steadyNow()).appendTo(responseHeaders);
  return err;
}

namespace {

std::optional<ApiError> checkRequest(const Snapshot& snap, const net::Exchange& ex,
                                     ChatPlan& plan) {
  const admission::Tenant& tenant = *plan.tenant;
  std::optional<ChatRequestError> bad = plan.api == ModelApi::kEmbeddings
                                            ? readEmbeddingsRequest(ex.body, plan.fields, plan.tokenIds)
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

std::optional<ApiError> admit(const Snapshot& snap, admission::KeyLimiter& limiter,
                              ChatPlan& plan) {
  const auto& clock = admission::SystemClock::instance();
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

  // The budget first: the most this request can cost, held atomically with
  // the check, so parallel requests cannot all slip under a nearly spent cap.
  const telemetry::Price& worst = snap.worstPrices[plan.route->index];
  telemetry::Cost maxCost =
      telemetry::costOf(worst, telemetry::Usage{static_cast<std::int64_t>(plan.promptEstimate), 0,
                                                static_cast<std::int64_t>(completionCap)});
  admission::BudgetAsk ask{static_cast<admission::NanoUsd>((maxCost.picoUsd + 999) / 1000),
                           plan.promptEstimate, completionCap};
  admission::Budget& budget = snap.budgets->budget(plan.tenant->index);
  auto held = budget.reserve(ask, clock.wallNow());
  if (auto* refused = std::get_if<admission::BudgetRefusal>(&held)) {
    plan.refusal = telemetry::RefusalReason::kBudget;
    ApiError e{429, std::move(refused->message), "insufficient_quota", "insufficient_quota"};
    e.headers.add("x-should-retry", "false");  // waiting for a retry cannot refill a budget
    return e;
  }
  plan.budgetHold = std::move(std::get<admission::BudgetHold>(held));

  admission::AdmitResult admitted = limiter.admit(reserve, clock.steadyNow());
  if (!admitted) {
    plan.budgetHold = admission::BudgetHold();  // released: this request costs nothing
    const admission::Refusal& r = admitted.refusal();
    switch (r.kind) {
      case admission::RefusalKind::kRequests:
        plan.refusal = telemetry::RefusalReason::kRequests;
        break;
      case admission::RefusalKind::kConcurrency:
        plan.refusal = telemetry::RefusalReason::kConcurrency;
        break;
      case admission::RefusalKind::kTokens:
      case admission::RefusalKind::kTooLarge:
        plan.refusal = telemetry::RefusalReason::kTokens;
        break;
    }
    ApiError e{429, r.message, std::string(r.errorType()), "rate_limit_exceeded"};
    r.appendHeaders(e.headers);
    return e;
  }
  plan.reservation = std::move(admitted.reservation());
  return std::nullopt;
}

}  // namespace

}  // namespace relay::pipeline
