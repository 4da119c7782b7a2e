// MCP transport checks and the JSON-RPC peek (rules in mcp_request.hpp).
#include "relay/pipeline/mcp_request.hpp"

#include <nlohmann/json.hpp>

#include "relay/common/headers.hpp"
#include "relay/common/json_write.hpp"

namespace relay::pipeline {
namespace {

// True when the parameters of one Accept entry say q=0 (refused).
bool refusedByQuality(std::string_view params) {
  while (!params.empty()) {
    std::size_t semi = params.find(';');
    std::string_view p = trimWhitespace(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view() : params.substr(semi + 1);
    if (p.size() < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=') continue;
    std::string_view v = trimWhitespace(p.substr(2));
    // "0", "0.", "0.0", "0.000": every digit after the point is zero.
    if (v.empty() || v[0] != '0') return false;
    for (char c : v.substr(1)) {
      if (c != '.' && c != '0') return false;
    }
    return true;
  }
  return false;
}

bool isIdValue(const nlohmann::json& id) {
  // JSON-RPC ids are strings or numbers; MCP forbids null.
  return id.is_string() || id.is_number_integer() || id.is_number_unsigned();
}

}  // namespace

JsonRpcPeek peekJsonRpc(std::string_view body) {
  JsonRpcPeek peek;
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_array()) {
    if (!j.empty()) peek.kind = JsonRpcPeek::Kind::kBatch;
    return peek;
  }
  if (!j.is_object()) return peek;
  auto id = j.find("id");
  if (id != j.end() && isIdValue(*id)) peek.idJson = id->dump();
  auto method = j.find("method");
  if (method != j.end()) {
    if (!method->is_string()) return peek;
    peek.method = method->get<std::string>();
    peek.kind = id != j.end() ? JsonRpcPeek::Kind::kRequest : JsonRpcPeek::Kind::kNotification;
    if (peek.kind == JsonRpcPeek::Kind::kRequest && peek.idJson.empty()) {
      peek.kind = JsonRpcPeek::Kind::kInvalid;  // a request with a null or odd id
    }
    auto params = j.find("params");
    if (params != j.end() && params->is_object()) {
      if (peek.method == "tools/call") {
        auto name = params->find("name");
        if (name != params->end() && name->is_string()) peek.toolName = name->get<std::string>();
      } else if (peek.method == "initialize") {
        auto version = params->find("protocolVersion");
        if (version != params->end() && version->is_string())
          peek.protocolVersion = version->get<std::string>();
      }
    }
    return peek;
  }
  if (j.contains("result") || j.contains("error")) peek.kind = JsonRpcPeek::Kind::kResponse;
  return peek;
}

std::string jsonRpcErrorBody(std::string_view idJson, int code, std::string_view message) {
  std::string out = R"({"jsonrpc":"2.0","id":)";
  out += idJson.empty() ? std::string_view("null") : idJson;
  out += R"(,"error":{"code":)";
  out += std::to_string(code);
  out += R"(,"message":)";
  appendJsonString(out, message);
  out += "}}";
  return out;
}

bool supportedMcpProtocolVersion(std::string_view version) {
  for (std::string_view v : kMcpProtocolVersions) {
    if (v == version) return true;
  }
  return false;
}

bool acceptOffers(std::string_view accept, std::string_view mediaType) {
  while (!accept.empty()) {
    std::size_t comma = accept.find(',');
    std::string_view entry = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    std::size_t semi = entry.find(';');
    std::string_view type = trimWhitespace(entry.substr(0, semi));
    std::string_view params =
        semi == std::string_view::npos ? std::string_view() : entry.substr(semi + 1);
    if (equalsIgnoreCase(type, mediaType) && !refusedByQuality(params)) return true;
  }
  return false;
}

bool isJsonContentType(std::string_view contentType) {
  std::string_view type = trimWhitespace(contentType.substr(0, contentType.find(';')));
  return equalsIgnoreCase(type, "application/json");
}

bool mcpOriginAllowed(std::string_view origin, const std::vector<std::string>& allowed) {
  for (const std::string& a : allowed) {
    if (a == "*" || equalsIgnoreCase(a, origin)) return true;
  }
  return false;
}

McpAccept mcpAcceptMode(std::string_view accept) {
  if (acceptOffers(accept, "application/json") && acceptOffers(accept, "text/event-stream"))
    return McpAccept::kBoth;
  if (trimWhitespace(accept).empty() || acceptOffers(accept, "application/json") ||
      acceptOffers(accept, "*/*") || acceptOffers(accept, "application/*"))
    return McpAccept::kJsonOnly;
  return McpAccept::kNeither;
}

std::optional<McpRefusal> checkMcpTransport(std::string_view method, const Headers& headers,
                                            const std::vector<std::string>& allowedOrigins,
                                            bool versionChecked) {
  // Origin first: a page on a foreign origin learns nothing else (DNS rebinding).
  if (const std::optional<std::string_view> origin = headers.find("origin");
      origin && !mcpOriginAllowed(*origin, allowedOrigins)) {
    return McpRefusal{403, kRpcTransportError,
                      "Forbidden: the Origin '" + std::string(*origin) +
                          "' is not in mcp.allowed_origins of this gateway",
                      "origin_not_allowed"};
  }
  std::string_view accept = headers.get("accept");
  if (method == "POST") {
    if (mcpAcceptMode(accept) == McpAccept::kNeither) {
      return McpRefusal{406, kRpcTransportError,
                        "Not Acceptable: the Accept header must allow application/json (and, for "
                        "streamed answers, text/event-stream)",
                        "not_acceptable"};
    }
    if (!isJsonContentType(headers.get("content-type"))) {
      return McpRefusal{415, kRpcTransportError,
                        "Unsupported Media Type: Content-Type must be application/json",
                        "unsupported_media_type"};
    }
  } else if (method == "GET" && !acceptOffers(accept, "text/event-stream")) {
    return McpRefusal{406, kRpcTransportError,
                      "Not Acceptable: the Accept header must list text/event-stream",
                      "not_acceptable"};
  }
  if (const std::optional<std::string_view> version = headers.find("mcp-protocol-version");
      version && !versionChecked && !supportedMcpProtocolVersion(*version)) {
    std::string list;
    for (std::string_view v : kMcpProtocolVersions)
      list += (list.empty() ? "" : ", ") + std::string(v);
    return McpRefusal{400, kRpcTransportError,
                      "Bad Request: unsupported MCP-Protocol-Version '" + std::string(*version) +
                          "' (supported: " + list + ")",
                      "unsupported_protocol_version"};
  }
  return std::nullopt;
}

bool idempotentMcpCall(const JsonRpcPeek& peek) {
  if (peek.kind != JsonRpcPeek::Kind::kRequest) return false;
  std::string_view m = peek.method;
  return m == "initialize" || m == "ping" || m.ends_with("/list");
}

bool mentionsUnknownSession(std::string_view body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) return false;
  auto err = j.find("error");
  if (err == j.end() || !err->is_object()) return false;
  auto msg = err->find("message");
  if (msg == err->end() || !msg->is_string()) return false;
  std::string text = toLower(msg->get<std::string>());
  return text.find("session") != std::string::npos;
}

}  // namespace relay::pipeline
