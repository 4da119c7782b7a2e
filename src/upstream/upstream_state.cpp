#include "relay/upstream/upstream_state.hpp"

namespace relay::upstream {

void Lease::report(HealthVerdict verdict, SteadyTime now) {
  if (!state) return;
  switch (verdict) {
    case HealthVerdict::kSuccess:
      state->health().onSuccess(health, now);
      break;
    case HealthVerdict::kFailure:
      state->health().onFailure(health, now);
      break;
    case HealthVerdict::kNeutral:
      state->health().onNeutral(health);
      break;
  }
}

UpstreamState::UpstreamState(const UpstreamOptions& options)
    : health_(options.health),
      retryBudget_(options.retryBudget),
      concurrency_(options.shaping.maxConcurrency),
      rate_(RateLimit::perMinute(options.shaping.rpm), effectiveRpmBurst(options.shaping)) {}

Admission UpstreamState::admit(SteadyTime now, bool retry, bool forced) {
  Admission a;
  a.health = forced ? health_.admitForced(now) : health_.admit(now);
  if (!a.health) {
    a.refusal = Refusal::kHealth;
    return a;
  }
  a.slot = concurrency_.tryAcquire();
  if (!a.slot) {
    concurrencyRefusals_.fetch_add(1, std::memory_order_relaxed);
    a.refusal = Refusal::kConcurrency;
    a.health = HealthTicket();  // hands a probe back now, not when `a` dies
    return a;
  }
  const RetryGrant grant = retry ? retryBudget_.tryRetry(now) : RetryGrant::kRefused;
  if (retry && grant == RetryGrant::kRefused) {
    a.refusal = Refusal::kBudget;
    a.health = HealthTicket();
    a.slot.release();
    return a;
  }
  const RateLimit::Result rate = rate_.tryAcquire(now);
  if (!rate.admitted) {
    rateRefusals_.fetch_add(1, std::memory_order_relaxed);
    retryBudget_.refund(grant, now);
    a.refusal = Refusal::kRate;
    a.retryAt = rate.retryAt;
    a.health = HealthTicket();
    a.slot.release();
    return a;
  }
  if (!retry) retryBudget_.onFirstAttempt(now);
  return a;
}

UpstreamStates::UpstreamStates(const std::vector<UpstreamOptions>& options) {
  for (const UpstreamOptions& o : options)
    states_.emplace_back(o);
}

}  // namespace relay::upstream
