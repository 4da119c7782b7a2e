// Request ids: the caller's `x-request-id` when it is sane, else a new one.
#pragma once

#include <string>
#include <string_view>

#include "relay/common/inline_string.hpp"

namespace relay {

// A request id, held inline (no heap allocation per request).
using RequestId = InlineString<128>;

// "req_" + 24 hex digits from a per-thread generator (no shared state).
std::string newRequestId();

// `given` when it is 1-128 visible ASCII characters, else a new id as
// newRequestId() makes them.
RequestId requestIdFrom(std::string_view given);

}  // namespace relay
