#include "relay/pipeline/steps.hpp"

#include <arpa/inet.h>
#include <array>
#include <charconv>

#include "relay/config/parse.hpp"

namespace relay::pipeline {

void describeRefusal(RelayEvent& e, telemetry::RefusalReason why, const ApiError& refused) {
  using telemetry::RefusalReason;
  const bool budget = why == RefusalReason::kBudget;
  e.kind = budget ? "budget.exceeded" : "request.rate_limited";
  e.reason = budget                               ? std::string_view("budget")
             : why == RefusalReason::kConcurrency ? "concurrency"
             : why == RefusalReason::kTokens      ? "tokens"
                                                  : "requests";
  e.message = refused.message;
  std::string_view ms = refused.headers.get("retry-after-ms");
  std::int64_t wait = 0;
  if (!ms.empty() && std::from_chars(ms.data(), ms.data() + ms.size(), wait).ec == std::errc())
    e.retryAfterMs = wait;
}

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

// What OpenAI and Moonshot document for requests, and what their SDKs send
// that is about the request rather than the caller (x-stainless-* describe
// the SDK and its retry count). traceparent and tracestate are not copied:
// the gateway sends its own (a span of its own in the caller's trace,
// trace_context.hpp).
constexpr std::string_view kChatFields[] = {
    "accept", "accept-language", "user-agent", "idempotency-key", "openai-beta", "x-stainless-*",
};
// The MCP transport's own fields (PROTOCOLS.md: forwarded unchanged).
constexpr std::string_view kMcpFields[] = {
    "accept", "content-type", "user-agent", "mcp-protocol-version", "last-event-id",
};

bool listed(std::string_view name, std::string_view entry) {
  if (!entry.empty() && entry.back() == '*')
    return name.starts_with(entry.substr(0, entry.size() - 1));
  return name == entry;
}

template <class List>
bool anyListed(std::string_view name, const List& list) {
  for (const auto& entry : list) {
    if (listed(name, entry)) return true;
  }
  return false;
}

// kChatFields, checked for every field of every request: by length first
// (each fixed name has its own), and the one prefix only for names long
// enough to carry it.
constexpr bool chatListed(std::string_view name) {
  constexpr std::string_view kPrefix = "x-stainless-";
  switch (name.size()) {
    case 6:
      return name == "accept";
    case 10:
      return name == "user-agent";
    case 11:
      return name == "openai-beta";
    case 15:
      return name == "accept-language" || name == "idempotency-key" || name.starts_with(kPrefix);
    default:
      return name.starts_with(kPrefix);
  }
}

// chatListed() is kChatFields: every name of the list passes, nothing else.
constexpr bool chatListedIsTheList() {
  for (std::string_view entry : kChatFields) {
    const bool prefix = entry.back() == '*';
    const std::string_view stem = prefix ? entry.substr(0, entry.size() - 1) : entry;
    if (prefix && !(chatListed("x-stainless-retry-count") && chatListed("x-stainless-os")))
      return false;
    if (!prefix && !chatListed(stem)) return false;
    if (chatListed(stem.substr(0, stem.size() - 1))) return false;  // one byte short
  }
  for (std::string_view other : {"authorization", "accepts", "x-stainless", "content-type",
                                 "x-api-key", "user-agents", "openai-betas", "host"}) {
    if (chatListed(other)) return false;
  }
  return true;
}
static_assert(chatListedIsTheList());

}  // namespace

bool forwardable(std::string_view name, ForwardFor kind, const std::vector<std::string>& extra) {
  const bool allowed = kind == ForwardFor::kChat ? chatListed(name) : anyListed(name, kMcpFields);
  return allowed || (!extra.empty() && anyListed(name, extra));
}

Headers forwardableHeaders(const Headers& callerHeaders, ForwardFor kind,
                           const std::vector<std::string>& extra) {
  Headers out;
  out.reserve(8);
  for (const HeaderField& f : callerHeaders) {
    if (forwardable(f.name, kind, extra)) out.add(f.name, f.value);
  }
  return out;
}

std::string forwardedFor(const net::RequestHead& head, const std::vector<config::Cidr>& trusted) {
  // "ip:port" or "[v6]:port" -> the address alone.
  std::string_view peer = head.peer;
  std::string ip;
  if (!peer.empty() && peer.front() == '[') {
    ip = std::string(peer.substr(1, peer.find(']') - 1));
  } else {
    ip = std::string(peer.substr(0, peer.rfind(':')));
  }
  if (trusted.empty()) return ip;
  std::array<std::uint8_t, 16> bytes{};
  bool v6 = ip.find(':') != std::string::npos;
  if (::inet_pton(v6 ? AF_INET6 : AF_INET, ip.c_str(), bytes.data()) != 1) return ip;
  bool fromProxy = false;
  for (const config::Cidr& block : trusted)
    fromProxy = fromProxy || config::cidrContains(block, bytes, v6);
  std::string_view given = trimWhitespace(head.headers.get("x-forwarded-for"));
  if (!fromProxy || given.empty()) return ip;
  return std::string(given) + ", " + ip;
}

}  // namespace relay::pipeline
