// LocalKeyGate: the budget first (the worst case held atomically against
// the cap), then the key's buckets and concurrency slot (key_limiter.hpp).
#include "relay/admission/clock.hpp"
#include "relay/pipeline/key_gate.hpp"
#include "relay/pipeline/snapshot.hpp"

namespace relay::pipeline {
namespace {

class LocalTicket final : public GateTicket {
 public:
  LocalTicket(admission::Reservation reservation, admission::BudgetHold hold)
      : reservation_(std::move(reservation)), hold_(std::move(hold)) {}

  void setUsedSoFar(std::uint64_t tokens, const admission::BudgetAsk& cost) override {
    if (reservation_.active()) reservation_.setUsedSoFar(tokens);
    hold_.setUsedSoFar(cost);
  }

  void settle(std::uint64_t tokens, const admission::BudgetAsk& cost,
              BudgetCrossed crossed) override {
    const auto& clock = admission::SystemClock::instance();
    if (reservation_.active()) reservation_.settle(tokens, clock.steadyNow());
    std::optional<double> share = hold_.settle(cost, clock.wallNow());
    if (share && crossed) crossed(*share);
  }

 private:
  admission::Reservation reservation_;
  admission::BudgetHold hold_;
};

ApiError budgetRefusal(admission::BudgetRefusal refused) {
  ApiError e{429, std::move(refused.message), "insufficient_quota", "insufficient_quota"};
  e.headers.add("x-should-retry", "false");  // waiting for a retry cannot refill a budget
  return e;
}

}  // namespace

GateResult LocalKeyGate::decide(const Snapshot& snap, const GateAsk& ask) {
  const auto& clock = admission::SystemClock::instance();
  GateResult out;
  admission::KeyLimiter& limiter = *snap.limiters[ask.tenant->index];
  admission::Budget& budget = snap.budgets->budget(ask.tenant->index);

  admission::BudgetHold hold;
  if (ask.refuseWhenSpent) {
    if (std::optional<admission::BudgetRefusal> spent = budget.check(clock.wallNow())) {
      out.reason = telemetry::RefusalReason::kBudget;
      out.refusal = budgetRefusal(std::move(*spent));
    }
  } else {
    auto held = budget.reserve(ask.budget, clock.wallNow());
    if (auto* refused = std::get_if<admission::BudgetRefusal>(&held)) {
      out.reason = telemetry::RefusalReason::kBudget;
      out.refusal = budgetRefusal(std::move(*refused));
    } else {
      hold = std::move(std::get<admission::BudgetHold>(held));
    }
  }
  const admission::SteadyTime now = clock.steadyNow();  // one reading for the buckets and headers
  if (!out.refusal) {
    admission::AdmitResult admitted = limiter.admit(ask.tokens, now, ask.holdSlot);
    if (admitted) {
      out.ticket =
          std::make_unique<LocalTicket>(std::move(admitted.reservation()), std::move(hold));
    } else {
      hold = admission::BudgetHold();  // released: this request costs nothing
      const admission::Refusal& r = admitted.refusal();
      switch (r.kind) {
        case admission::RefusalKind::kRequests:
          out.reason = telemetry::RefusalReason::kRequests;
          break;
        case admission::RefusalKind::kConcurrency:
          out.reason = telemetry::RefusalReason::kConcurrency;
          break;
        case admission::RefusalKind::kTokens:
        case admission::RefusalKind::kTooLarge:
          out.reason = telemetry::RefusalReason::kTokens;
          break;
      }
      ApiError e{429, r.message, std::string(r.errorType()), "rate_limit_exceeded"};
      r.appendHeaders(e.headers);
      out.refusal = std::move(e);
    }
  }
  out.rateHeaders = limiter.headers(now);
  return out;
}

net::Task<GateResult> LocalKeyGate::admit(const Snapshot& snapshot, const GateAsk& ask) {
  co_return decide(snapshot, ask);
}

void LocalKeyGate::appendRateHeaders(const Snapshot& snap, const admission::Tenant& tenant,
                                     Headers& out) {
  snap.limiters[tenant.index]
      ->headers(admission::SystemClock::instance().steadyNow())
      .appendTo(out);
}

}  // namespace relay::pipeline
