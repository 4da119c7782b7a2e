// The resilience options derived from the loaded config. Kept apart from the
// logic headers so that those (and their tests) never depend on config.hpp.
#pragma once

#include <vector>

#include "relay/config/config.hpp"
#include "relay/upstream/retry_planner.hpp"
#include "relay/upstream/upstream_state.hpp"

namespace relay::upstream {

RetryOptions retryOptions(const config::Retry& retry);

// A half-open probe is an ordinary request, so it may take as long as the
// total timeout before it is presumed lost.
UpstreamOptions upstreamOptions(const config::Upstream& upstream, const config::Retry& retry,
                                const config::Timeouts& timeouts);

// One per config upstream, in the config's (and so the Catalog's) order.
std::vector<UpstreamOptions> upstreamOptions(const config::Config& config);

}  // namespace relay::upstream
