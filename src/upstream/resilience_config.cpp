#include "relay/upstream/resilience_config.hpp"

namespace relay::upstream {

RetryOptions retryOptions(const config::Retry& retry) {
  RetryOptions o;
  o.maxAttempts = retry.maxAttempts;
  o.backoff.base = Millis(retry.backoff.baseMs);
  o.backoff.max = Millis(retry.backoff.maxMs);
  // The config validator has already refused entries RetryOn cannot read.
  o.retryOn = RetryOn::parse(retry.retryOn);
  return o;
}

UpstreamOptions upstreamOptions(const config::Upstream& upstream, const config::Retry& retry,
                                const config::Timeouts& timeouts) {
  UpstreamOptions o;
  o.health.ejectAfterFailures = upstream.health.ejectAfterFailures;
  o.health.baseEjection = Millis(upstream.health.baseEjectionMs);
  o.health.maxEjection = Millis(upstream.health.maxEjectionMs);
  o.health.probeTimeout = Millis(timeouts.totalMs);
  o.retryBudget.ratio = retry.budget.ratio;
  o.retryBudget.minPerSecond = retry.budget.minPerSecond;
  o.shaping.maxConcurrency = upstream.maxConcurrency;
  o.shaping.rpm = upstream.rpm;
  return o;
}

std::vector<UpstreamOptions> upstreamOptions(const config::Config& config) {
  std::vector<UpstreamOptions> all;
  all.reserve(config.upstreams.size());
  for (const config::Upstream& u : config.upstreams) {
    all.push_back(upstreamOptions(u, config.retry, config.timeouts));
  }
  return all;
}

}  // namespace relay::upstream
