// The answer a chat request gets when no attempt succeeded: composed from the
// attempts that failed and what kept others from being made. A pure function
// of those facts, so each of its statuses is tested without an upstream.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "relay/common/headers.hpp"
#include "relay/upstream/client.hpp"
#include "relay/upstream/retry_planner.hpp"

namespace relay::upstream {
struct ModelRoute;
}

namespace relay::pipeline {

// An answer the gateway gives instead of an upstream's 2xx: an upstream error
// passed through (OpenAI-shaped) or the gateway's own.
struct ErrorAnswer {
  int status = 502;
  std::string body;  // OpenAI-shaped JSON
  std::string code;  // for the record
  Headers headers;   // retry-after, x-should-retry, ...
};

// The gateway's own error: `message` says what happened and what to do.
ErrorAnswer gatewayError(int status, std::string_view message, std::string_view type,
                         std::string code);

// One attempt's failure, kept for the answer if nothing succeeds.
struct Tried {
  std::size_t index = 0;  // the upstream, in the catalog
  const upstream::ModelRoute* route = nullptr;
  std::string upstream;
  std::string what;  // "connection refused", "HTTP 503"
  upstream::AttemptFailure failure;
  std::optional<ErrorAnswer> passthrough;  // an upstream error response
  upstream::FailureKind transport = upstream::FailureKind::kNone;
  bool credentialRefused = false;  // 401/403: the upstream refused the gateway's own key
};

// Everything the final answer depends on.
struct Unserved {
  std::string_view model;        // the model the caller asked for
  std::span<const Tried> tried;  // in the order they were made
  // Set when data residency barred some upstream ("key 'k' is limited to
  // regions eu"): a failure to serve then names the rule.
  std::string_view residencyRule;
  // Nothing was tried because every upstream was at its concurrency or rate
  // cap; `fullRetryAt` is when one frees up, if known.
  bool full = false;
  std::optional<std::chrono::steady_clock::time_point> fullRetryAt;
  bool budgetRefused = false;  // the retry budget stopped further attempts
};

// The last upstream's own error answer when it gave one; otherwise the
// gateway's: 429 (all at capacity), 503 (none available, several failed, or
// a residency rule), 502 (the one upstream failed, or refused the gateway's
// credential), 504 (every attempt timed out). `now`: a clock reading, for
// the 429's Retry-After.
ErrorAnswer finalAnswer(const Unserved& u, std::chrono::steady_clock::time_point now);

}  // namespace relay::pipeline
