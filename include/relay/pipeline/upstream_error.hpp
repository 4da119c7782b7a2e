// An upstream's error response, put into OpenAI's shape for the caller.
//
// OpenAI callers expect {"error":{"message","type","param","code"}} with all
// four keys; Moonshot answers {"error":{"type","message"}} with its own type
// names; a proxy in front of either may answer HTML. Moonshot's types are mapped
// to OpenAI's codes (PROTOCOLS.md), by type rather than status, since
// Moonshot reports an exhausted quota as 429 or 403.
#pragma once

#include <string>
#include <string_view>

namespace relay::pipeline {

struct UpstreamErrorView {
  std::string body;       // OpenAI-shaped JSON
  std::string type;       // OpenAI type after mapping
  std::string code;       // OpenAI code after mapping ("" = null)
  bool retryable = true;  // false: retrying cannot help (auth, quota, bad request)
};

// `upstreamKey` (the credential the gateway sent it) and anything shaped like
// a key are scrubbed from the words passed on (redact.hpp).
UpstreamErrorView normaliseUpstreamError(std::string_view upstreamName, int status,
                                         std::string_view body, std::string_view upstreamKey = {});

// True when an upstream's answer says it refused the gateway's own
// credential: 401, or 403 that is not an exhausted quota. The caller's key is
// fine (the gateway checked it); the gateway's configuration is not.
bool refusedGatewayCredential(int status, const UpstreamErrorView& view);

}  // namespace relay::pipeline
