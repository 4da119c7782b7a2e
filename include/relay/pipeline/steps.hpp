// The steps of the request path that every endpoint shares.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "relay/admission/key_store.hpp"
#include "relay/common/headers.hpp"
#include "relay/config/config.hpp"
#include "relay/net/exchange.hpp"
#include "relay/pipeline/events.hpp"
#include "relay/pipeline/respond.hpp"
#include "relay/telemetry/record.hpp"

namespace relay::pipeline {

// Authenticates the caller. On failure returns the error to answer (401 for a
// missing, unknown or mistyped key; 400 for conflicting keys).
std::optional<ApiError> authenticate(const admission::KeyStore& keys, const Headers& headers,
                                     const admission::Tenant*& tenant);

// Which of a caller's fields may reach an upstream. Forwarding is by
// allow-list: anything not named here (credentials, cookies, caller identity
// such as OpenAI-Organization / OpenAI-Project, proxies' fields) stays at the
// gateway. `extra` is the config's forward_headers (names, or prefixes
// ending in '*').
enum class ForwardFor { kChat, kMcp };
Headers forwardableHeaders(const Headers& callerHeaders, ForwardFor kind,
                           const std::vector<std::string>& extra);
// Whether the caller's field `name` (lowercase) may reach an upstream: the
// test forwardableHeaders() applies to each field.
bool forwardable(std::string_view name, ForwardFor kind, const std::vector<std::string>& extra);

// X-Forwarded-For as the gateway sends it: the peer's address, appended to
// the caller's own X-Forwarded-For only when the peer is a trusted proxy
// (server.trusted_proxies); from anyone else the caller's value is dropped.
std::string forwardedFor(const net::RequestHead& head, const std::vector<config::Cidr>& trusted);

// The part of a request.rate_limited / budget.exceeded event that says why:
// kind, reason ("budget", "concurrency", "tokens", "requests"), the refusal's
// message and its Retry-After in ms. The strings stay owned by `refused`.
void describeRefusal(RelayEvent& e, telemetry::RefusalReason why, const ApiError& refused);

}  // namespace relay::pipeline
