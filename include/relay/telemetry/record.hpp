// What the pipeline tells telemetry: one RequestRecord per request at
// settlement, plus a few events while a request runs.
//
// Plain data on purpose. There is no field for a header, a key, a token or a
// body: the access log and the metrics can only ever see names from the
// config, ids, numbers and the short text fields below — so no secret can
// reach them through this API.
#pragma once

#include <cstdint>
#include <string_view>

#include "relay/telemetry/cost.hpp"
#include "relay/telemetry/labels.hpp"

namespace relay::telemetry {

enum class Protocol : std::uint8_t { kUnknown, kHttp1, kHttp2 };

// One finished chat request. Views need only stay valid during record().
// Ids follow LabelSpace's conventions; each id travels with its name, and the
// name wins when they disagree (an id from an older config snapshot). Leave an
// id kNone to have it looked up by name (slower: a binary search).
struct RequestRecord {
  std::string_view requestId;  // the gateway's x-request-id
  std::string_view traceId;    // W3C trace id (32 hex), "" when none
  std::string_view spanId;     // the gateway's span in that trace (16 hex)

  std::string_view keyName;  // "" before authentication
  std::uint32_t keyId = kNone;
  std::string_view model;  // the model the caller asked for
  std::uint32_t modelId = kNone;
  // Set when a fallback model served the request; metrics, prices and cost
  // then use it rather than `model`.
  std::string_view fallbackModel;
  std::uint32_t fallbackModelId = kNone;
  std::string_view upstream;  // the upstream that produced the answer, "" if none did
  std::uint32_t upstreamId = kNone;
  std::string_view region;   // the answering upstream's region, "" if none
  std::uint32_t nodeId = 0;  // LabelSpace::nodeId(X-Node-Id value); 0 = no header

  Protocol protocol = Protocol::kUnknown;
  bool stream = false;
  int status = 0;              // HTTP status sent to the caller; 0 = none was sent
  std::uint32_t attempts = 0;  // upstream attempts, retries included

  // Microseconds; -1 = not applicable or not measured.
  std::int64_t durationUs = 0;   // request head received → response finished
  std::int64_t ttftUs = -1;      // → first content byte sent to the caller
  std::int64_t upstreamUs = -1;  // final attempt: request sent → response head
  std::int64_t overheadUs = -1;  // the gateway's own time (not waiting on upstream)

  Usage usage;                  // promptTokens includes cachedTokens
  bool usageEstimated = false;  // the upstream gave no usage; these are estimates

  std::string_view errorCode;  // OpenAI-style code ("rate_limit_exceeded"), "" = none
};

// What record() settled: the cost every consumer (metrics, log, budgets) uses.
struct Settlement {
  Cost cost;
  bool priced = true;  // false: tokens were used but no price row matched (cost 0)
};

// Fixed label sets of the event counters. The order is the label table order
// in metrics.cpp; append before the k*Count member only.
enum class UpstreamFailure : std::uint8_t {
  kConnectError,
  kTimeout,
  kRateLimited,  // 429
  kServerError,  // 5xx
  kReset,        // connection or stream reset before the response finished
  kOther,
  kCount
};

enum class FallbackKind : std::uint8_t { kUpstream, kModel, kCount };

enum class EjectionReason : std::uint8_t {
  kConsecutiveFailures,
  kActiveCheck,
  kCredentialRefused,  // the upstream answered 401/403 to the gateway's own key
  kOther,
  kCount
};

enum class RefusalReason : std::uint8_t {
  kRequests,          // rpm bucket
  kTokens,            // tpm bucket
  kConcurrency,       // per-key in-flight cap
  kBudget,            // USD or token budget spent
  kUpstreamCapacity,  // every candidate upstream at its concurrency or rpm cap
  kRetryBudget,       // retries refused by the retry budget
  kOther,
  kSharedState,  // 503: the shared state store is unreachable (on_redis_failure: reject)
  kCount
};

enum class HealthState : std::uint8_t { kHealthy = 0, kHalfOpen = 1, kEjected = 2 };

enum class ReloadOutcome : std::uint8_t { kSuccess, kFailure, kCount };

// MCP methods with their own label; anything else is "other".
enum class McpMethod : std::uint8_t {
  kInitialize,
  kPing,
  kToolsList,
  kToolsCall,
  kResourcesList,
  kResourcesRead,
  kResourcesTemplatesList,
  kResourcesSubscribe,
  kResourcesUnsubscribe,
  kPromptsList,
  kPromptsGet,
  kCompletionComplete,
  kLoggingSetLevel,
  kNotification,   // any "notifications/..." message
  kResponse,       // a POST carrying only JSON-RPC responses (client → server)
  kBatch,          // a JSON-RPC batch (protocol 2025-03-26)
  kStreamOpen,     // GET: the server-to-client SSE stream
  kSessionDelete,  // DELETE: end of session
  kOther,
  kCount
};

// A JSON-RPC method name → its label. Never returns kCount.
McpMethod mcpMethodOf(std::string_view jsonRpcMethod);
std::string_view mcpMethodLabel(McpMethod m);

// One finished MCP exchange (one HTTP request on /v1/mcp).
struct McpRecord {
  std::string_view keyName;  // "" before authentication
  std::uint32_t keyId = kNone;
  std::string_view server;
  std::uint32_t serverId = kNone;
  McpMethod method = McpMethod::kOther;
  int status = 0;
  std::int64_t durationUs = 0;  // request head → response finished (kStreamOpen: → response head)
};

}  // namespace relay::telemetry
