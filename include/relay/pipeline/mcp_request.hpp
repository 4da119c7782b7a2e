// What the gateway checks on an MCP Streamable HTTP request before anything
// reaches an upstream, and what it reads of the JSON-RPC body. Plain C++: no
// sockets, so the rules are unit-tested directly.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "relay/common/headers.hpp"

namespace relay::pipeline {

// JSON-RPC error codes the gateway uses in its own answers (the SDKs use
// -32000 for transport errors and -32001 for an unknown session).
inline constexpr int kRpcParseError = -32700;
inline constexpr int kRpcInvalidRequest = -32600;
inline constexpr int kRpcInvalidParams = -32602;
inline constexpr int kRpcInternalError = -32603;
inline constexpr int kRpcTransportError = -32000;
inline constexpr int kRpcSessionNotFound = -32001;

// What the gateway needs of a POST body: its kind, the method (for metrics and
// the retry rule) and the id (echoed in the gateway's own errors). The rest of
// the body is forwarded untouched and never re-serialised.
struct JsonRpcPeek {
  enum class Kind {
    kInvalid,       // not JSON, or not a JSON-RPC message
    kRequest,       // a method with an id
    kNotification,  // a method without an id
    kResponse,      // a result or error sent by the client
    kBatch,         // an array (protocol 2025-03-26 only)
  };
  Kind kind = Kind::kInvalid;
  std::string method;  // kRequest / kNotification
  std::string idJson;  // the id as JSON text ("7", "\"a\""); "" when there is none
  std::string toolName;         // tools/call: params.name ("" when absent or not a string)
  std::string protocolVersion;  // initialize: params.protocolVersion
};

JsonRpcPeek peekJsonRpc(std::string_view body);

// {"jsonrpc":"2.0","id":<idJson>,"error":{"code":..,"message":..}}.
std::string jsonRpcErrorBody(std::string_view idJson, int code, std::string_view message);

// A refusal made by the gateway itself. Answered as a JSON-RPC error with the
// request's id when it has one, else as the gateway's plain error with `code`.
struct McpRefusal {
  int status = 400;
  int rpcCode = kRpcTransportError;
  std::string message;  // says what to fix; never contains a secret
  std::string code;     // e.g. "not_acceptable"
  Headers headers;      // extra fields (allow, www-authenticate)
};

// The protocol versions the gateway relays (MCP-Protocol-Version).
inline constexpr std::string_view kMcpProtocolVersions[] = {"2025-03-26", "2025-06-18",
                                                            "2025-11-25"};
bool supportedMcpProtocolVersion(std::string_view version);

// True when the Accept value lists `mediaType` (case-insensitive, parameters
// ignored, q=0 meaning "not acceptable"). Wildcards do not count: the MCP
// transport wants both types listed explicitly.
bool acceptOffers(std::string_view accept, std::string_view mediaType);

// True when the Content-Type value is application/json (any parameters).
bool isJsonContentType(std::string_view contentType);

// True when `origin` (the Origin header, present) is in `allowed` (normalised
// origins from the config, or "*"). Compared ignoring ASCII case.
bool mcpOriginAllowed(std::string_view origin, const std::vector<std::string>& allowed);

// What a POST's Accept lets the gateway answer with.
enum class McpAccept {
  kBoth,      // application/json and text/event-stream, as the MCP spec asks
  kJsonOnly,  // a plain HTTP client (no Accept, */*, or JSON only): the answer is
              // gathered into one JSON body, whatever the server streams
  kNeither,   // nothing the gateway can send: 406
};
McpAccept mcpAcceptMode(std::string_view accept);

// Transport rules for `method` ("GET", "POST", "DELETE") with `headers`:
//   Origin present and not allowed            -> 403
//   POST whose Accept offers neither JSON nor SSE -> 406 (JSON-only is served)
//   GET whose Accept lacks text/event-stream  -> 406
//   POST whose Content-Type is not JSON       -> 415
//   MCP-Protocol-Version present and unsupported, unless `versionChecked`
//   (an initialize negotiates its version in the body; a session's request is
//   checked against the session's own version) -> 400
std::optional<McpRefusal> checkMcpTransport(std::string_view method, const Headers& headers,
                                            const std::vector<std::string>& allowedOrigins,
                                            bool versionChecked);

// True when a POST carrying `peek` may be sent again after the upstream could
// not be reached: initialize, ping and the */list methods, whose repetition
// changes nothing. Never tools/call, notifications or batches.
bool idempotentMcpCall(const JsonRpcPeek& peek);

// True when an upstream error body says the session is unknown or ended
// (some servers answer 400 where the spec says 404).
bool mentionsUnknownSession(std::string_view body);

}  // namespace relay::pipeline
