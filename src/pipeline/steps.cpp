#include "relay/pipeline/steps.hpp"

namespace relay::pipeline {

std::optional<ApiError> authenticate(const admission::KeyStore& keys, const Headers& headers,
                                     const admission::Tenant*& tenant) {
  admission::AuthResult r = keys.authenticate(headers);
  if (r.status == admission::AuthStatus::kOk) {
    tenant = r.tenant;
    return std::nullopt;
  }
  ApiError e;
  e.message = std::move(r.message);
  e.type = "invalid_request_error";
  if (r.status == admission::AuthStatus::kConflict) {
    e.status = 400;
    e.code = "conflicting_api_keys";
  } else {
    e.status = 401;
    e.code = "invalid_api_key";
  }
  return e;
}

namespace {
bool dropWhenForwarding(std::string_view n) {
  // Credentials of the caller never leave the gateway (the upstream's own key is
  // injected instead); framing and hop fields belong to the caller's connection.
  return n == "authorization" || n == "x-api-key" || n == "api-key" || n == "proxy-authorization" ||
         n == "cookie" || n == "host" || n == ":authority" || n == "content-length" ||
         n == "connection" || n == "keep-alive" || n == "proxy-connection" ||
         n == "transfer-encoding" || n == "te" || n == "upgrade" || n == "trailer" ||
         n == "expect" || n == "accept-encoding" || n == "x-request-id" || n == "forwarded" ||
         n.starts_with("x-relay-");
}
}  // namespace

Headers forwardableHeaders(const Headers& callerHeaders) {
  Headers out;
  out.reserve(callerHeaders.size() + 4);
  for (const HeaderField& f : callerHeaders) {
    if (!dropWhenForwarding(f.name)) out.add(f.name, f.value);
  }
  return out;
}

}  // namespace relay::pipeline
