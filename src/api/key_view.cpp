#include "key_view.hpp"

#include <chrono>

#include "relay/admission/budget_period.hpp"
#include "relay/admission/clock.hpp"
#include "relay/config/parse.hpp"

namespace relay::api {
namespace {

using nlohmann::json;

std::string isoTime(std::int64_t unix) {
  return admission::formatUtc(admission::WallTime(std::chrono::seconds(unix)));
}

}  // namespace

json describeKey(const pipeline::Snapshot& snap, const admission::Tenant& t,
                 const admission::KeyRegistry* registry) {
  const auto& clock = admission::SystemClock::instance();
  json k = json::parse(config::keyToJson(*t.config));
  k.erase("sha256");  // a digest is no secret, but nothing needs it from here
  std::optional<admission::KeyEntryInfo> info = registry ? registry->info(t.name) : std::nullopt;
  k["source"] = info && !info->fromFile ? "api" : "file";
  k["changed_by_api"] = info.has_value();
  k["revoked"] = false;
  if (info && !info->previous.empty()) {
    k["previous_secret_valid_until"] = isoTime(info->previous.back().untilUnix);
  }
  const admission::KeyLimiter& limiter = *snap.limiters[t.index];
  const auto now = clock.steadyNow();
  json rate = {{"in_flight", limiter.inFlight()}};
  if (const auto* b = limiter.requestBucket()) {
    rate["requests_limit"] = b->capacity();
    rate["requests_remaining"] = std::max<std::int64_t>(0, b->remaining(now));
  }
  if (const auto* b = limiter.tokenBucket()) {
    rate["tokens_limit"] = b->capacity();
    rate["tokens_remaining"] = std::max<std::int64_t>(0, b->remaining(now));
  }
  k["rate"] = rate;
  admission::Budget& budget = snap.budgets->budget(t.index);
  admission::BudgetUsage used = budget.usage(clock.wallNow());
  admission::BudgetAsk held = budget.held();
  json usage = {{"period_start", admission::formatUtc(used.periodStart)},
                {"spent_usd", static_cast<double>(used.spent) / 1e9},
                {"held_usd", static_cast<double>(held.usd) / 1e9},
                {"input_tokens", used.inputTokens},
                {"output_tokens", used.outputTokens}};
  if (auto end = admission::periodEnd(budget.options().period, used.periodStart))
    usage["resets_at"] = admission::formatUtc(*end);
  k["usage"] = usage;
  return k;
}

}  // namespace relay::api
