// The steps of the request path that every endpoint shares.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "relay/admission/key_store.hpp"
#include "relay/common/headers.hpp"
#include "relay/pipeline/respond.hpp"

namespace relay::pipeline {

// Authenticates the caller. On failure returns the error to answer (401 for a
// missing, unknown or mistyped key; 400 for conflicting keys).
std::optional<ApiError> authenticate(const admission::KeyStore& keys, const Headers& headers,
                                     const admission::Tenant*& tenant);

// The caller's headers as they may go upstream: hop-by-hop fields, the
// caller's credentials, cookies, Host and framing fields removed.
Headers forwardableHeaders(const Headers& callerHeaders);

}  // namespace relay::pipeline
