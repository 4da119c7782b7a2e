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

UpstreamStates::UpstreamStates(const std::vector<UpstreamOptions>& options) : options_(options) {
  for (const UpstreamOptions& o : options)
    states_.push_back(std::make_shared<UpstreamState>(o));
}

namespace {
bool sameOptions(const UpstreamOptions& a, const UpstreamOptions& b) {
  return a.health.ejectAfterFailures == b.health.ejectAfterFailures &&
         a.health.baseEjection == b.health.baseEjection &&
         a.health.maxEjection == b.health.maxEjection &&
         a.health.probeTimeout == b.health.probeTimeout &&
         a.retryBudget.ratio == b.retryBudget.ratio &&
         a.retryBudget.minPerSecond == b.retryBudget.minPerSecond &&
         a.retryBudget.memory == b.retryBudget.memory &&
         a.shaping.maxConcurrency == b.shaping.maxConcurrency && a.shaping.rpm == b.shaping.rpm &&
         a.shaping.rpmBurst == b.shaping.rpmBurst;
}
}  // namespace

UpstreamStates::UpstreamStates(const std::vector<UpstreamOptions>& options,
                               const std::vector<std::string>& names,
                               const UpstreamStates& previous,
                               const std::vector<std::string>& previousNames)
    : options_(options) {
  for (std::size_t i = 0; i < options.size(); ++i) {
    std::shared_ptr<UpstreamState> state;
    for (std::size_t j = 0; j < previousNames.size() && j < previous.states_.size(); ++j) {
      if (previousNames[j] == names.at(i) && sameOptions(previous.options_[j], options[i])) {
        state = previous.states_[j];
        break;
      }
    }
    states_.push_back(state ? state : std::make_shared<UpstreamState>(options[i]));
  }
}

}  // namespace relay::upstream
