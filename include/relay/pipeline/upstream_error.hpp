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

UpstreamErrorView normaliseUpstreamError(std::string_view upstreamName, int status,
                                         std::string_view body);

}  // namespace relay::pipeline
