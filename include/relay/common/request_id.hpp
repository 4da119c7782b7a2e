// Request ids: the caller's `x-request-id` when it is sane, else a new one.
#pragma once

#include <string>
#include <string_view>

namespace relay {

// "req_" + 24 hex digits from a per-thread generator (no shared state).
std::string newRequestId();

// `given` when it is 1-128 visible ASCII characters, else newRequestId().
std::string requestIdFrom(std::string_view given);

}  // namespace relay
