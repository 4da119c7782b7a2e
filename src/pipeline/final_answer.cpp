#include "final_answer.hpp"

#include <algorithm>

#include "relay/common/json_write.hpp"

namespace relay::pipeline {
namespace {

using upstream::FailureClass;

// "a: connection refused; b: HTTP 503"
std::string describeAll(std::span<const Tried> tried) {
  std::string what;
  for (const Tried& t : tried) {
    if (!what.empty()) what += "; ";
    what += t.upstream + ": " + t.what;
  }
  return what;
}

// Every upstream tried last refused the gateway's credential: a 502 that
// names them (never a key, never their words), which the caller cannot fix.
ErrorAnswer credentialAnswer(const Unserved& u) {
  std::string names;
  for (const Tried& t : u.tried) {
    if (!t.credentialRefused || names.find("'" + t.upstream + "'") != std::string::npos) continue;
    if (!names.empty()) names += ", ";
    names += "'" + t.upstream + "'";
  }
  ErrorAnswer e = gatewayError(
      502,
      "The gateway's credential for upstream " + names +
          " was refused (HTTP 401/403); your key is fine. The gateway's operator must fix "
          "upstreams[].api_key. No other upstream could serve the model '" +
          std::string(u.model) + "'.",
      "server_error", "upstream_auth_failed");
  e.headers.add("x-should-retry", "false");
  return e;
}

// The answer as if no residency rule applied.
ErrorAnswer unrestrictedAnswer(const Unserved& u, std::chrono::steady_clock::time_point now) {
  const std::string model(u.model);
  if (u.tried.empty()) {
    if (u.full) {
      ErrorAnswer e = gatewayError(
          429,
          "Every upstream serving '" + model +
              "' is at its concurrency or rate cap (max_concurrency / rpm); try again shortly.",
          "requests", "upstream_capacity");
      auto wait = u.fullRetryAt ? *u.fullRetryAt - now : std::chrono::seconds(1);
      auto secs = std::max<long long>(1, std::chrono::ceil<std::chrono::seconds>(wait).count());
      e.headers.add("retry-after", std::to_string(secs));
      return e;
    }
    return gatewayError(503, "No upstream is available for the model '" + model + "'.",
                        "server_error", "no_upstream_available");
  }
  // The last upstream answered with an error: that answer, with its status
  // and its words, is the most honest thing to pass on.
  const Tried& last = u.tried.back();
  if (last.passthrough) return *last.passthrough;
  if (last.credentialRefused) return credentialAnswer(u);
  const std::string what = describeAll(u.tried);
  const std::string why = u.budgetRefused ? " (the retry budget refused further retries)" : "";
  const std::string attempts = std::to_string(u.tried.size()) + " attempt(s): ";
  if (std::all_of(u.tried.begin(), u.tried.end(),
                  [](const Tried& t) { return t.failure.kind == FailureClass::kTimeout; })) {
    return gatewayError(504,
                        "No upstream answered the model '" + model + "' in time after " + attempts +
                            what + why + ".",
                        "server_error", "upstream_timeout");
  }
  // One upstream that cannot be reached is a bad gateway (502); when several
  // were tried and none could serve, the service is unavailable (503).
  const bool oneUpstream = std::all_of(u.tried.begin(), u.tried.end(), [&](const Tried& t) {
    return t.upstream == u.tried.front().upstream;
  });
  return gatewayError(
      oneUpstream ? 502 : 503,
      "No upstream could serve the model '" + model + "' after " + attempts + what + why + ".",
      "server_error", "upstream_unavailable");
}

}  // namespace

ErrorAnswer gatewayError(int status, std::string_view message, std::string_view type,
                         std::string code) {
  ErrorAnswer e;
  e.status = status;
  e.body = openAiErrorJson(message, type, code);
  e.code = std::move(code);
  return e;
}

// Under a residency rule, a failure to serve is a 503 that names the rule:
// the upstreams it keeps out were never an option.
ErrorAnswer finalAnswer(const Unserved& u, std::chrono::steady_clock::time_point now) {
  ErrorAnswer e = unrestrictedAnswer(u, now);
  if (u.residencyRule.empty() || e.status < 500) return e;
  const std::string what = describeAll(u.tried);
  ErrorAnswer r =
      gatewayError(503,
                   "No upstream this request may use could serve the model '" +
                       std::string(u.model) + "': " + std::string(u.residencyRule) +
                       ", and upstreams in other regions are never used for it" +
                       (what.empty() ? std::string(" (none of the allowed ones is available)")
                                     : " (tried: " + what + ")") +
                       ". Retry later, or ask the gateway's operator about the allowed regions.",
                   "server_error", "residency_unavailable");
  r.headers.add("retry-after", "1");
  return r;
}

}  // namespace relay::pipeline
