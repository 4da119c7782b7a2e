// The steps of the request path that every endpoint shares.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "relay/admission/key_store.hpp"
#include "relay/common/headers.hpp"
#include "relay/pipeline/respond.hpp"

namespace relay::pipeline {

// The caller's x-request-id when it is sane (1-128 visible ASCII characters),
// else a new one from `generate`.
template <class Generate>
std::string requestIdFor(const Headers& headers, Generate&& generate) {
  std::string_view given = headers.get("x-request-id");
  bool ok = !given.empty() && given.size() <= 128;
  for (char c : given) ok = ok && c > 0x20 && c < 0x7f;
  return ok ? std::string(given) : generate();
}

// Authenticates the caller. On failure returns the error to answer (401 for a
// missing, unknown or mistyped key; 400 for conflicting keys).
std::optional<ApiError> authenticate(const admission::KeyStore& keys, const Headers& headers,
                                     const admission::Tenant*& tenant);

// The caller's headers as they may go upstream: hop-by-hop fields, the
// caller's credentials, cookies, Host and framing fields removed.
Headers forwardableHeaders(const Headers& callerHeaders);

}  // namespace relay::pipeline
