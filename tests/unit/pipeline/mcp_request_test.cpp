#include "relay/pipeline/mcp_request.hpp"

#include <gtest/gtest.h>

namespace relay::pipeline {
namespace {

using Kind = JsonRpcPeek::Kind;

Headers post(std::string_view accept = "application/json, text/event-stream",
             std::string_view type = "application/json") {
  Headers h;
  if (!accept.empty()) h.add("accept", accept);
  if (!type.empty()) h.add("content-type", type);
  return h;
}

const std::vector<std::string> kOrigins = {"https://app.example.com"};

TEST(McpPeek, ReadsKindMethodAndId) {
  JsonRpcPeek p = peekJsonRpc(R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}})");
  EXPECT_EQ(p.kind, Kind::kRequest);
  EXPECT_EQ(p.method, "tools/call");
  EXPECT_EQ(p.idJson, "7");
  p = peekJsonRpc(R"({"jsonrpc":"2.0","id":"a\"b","method":"ping"})");
  EXPECT_EQ(p.idJson, R"("a\"b")");
  p = peekJsonRpc(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  EXPECT_EQ(p.kind, Kind::kNotification);
  EXPECT_EQ(p.idJson, "");
  EXPECT_EQ(peekJsonRpc(R"({"jsonrpc":"2.0","id":3,"result":{}})").kind, Kind::kResponse);
  EXPECT_EQ(peekJsonRpc(R"({"jsonrpc":"2.0","id":3,"error":{"code":1}})").kind, Kind::kResponse);
  EXPECT_EQ(peekJsonRpc(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])").kind, Kind::kBatch);
}

TEST(McpPeek, RefusesWhatIsNotJsonRpc) {
  for (const char* body : {"", "{", "[]", "42", R"({"jsonrpc":"2.0"})", R"({"method":3,"id":1})",
                           R"({"method":"ping","id":null})", R"({"method":"ping","id":{}})"}) {
    EXPECT_EQ(peekJsonRpc(body).kind, Kind::kInvalid) << body;
  }
}

TEST(McpPeek, ErrorBodiesEchoTheId) {
  EXPECT_EQ(
      jsonRpcErrorBody("7", -32001, "Session \"x\" not found"),
      R"({"jsonrpc":"2.0","id":7,"error":{"code":-32001,"message":"Session \"x\" not found"}})");
  EXPECT_EQ(jsonRpcErrorBody("", -32700, "Parse error"),
            R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}})");
}

TEST(McpChecks, APostMustAcceptJsonAndIsPlainWithoutSse) {
  EXPECT_FALSE(checkMcpTransport("POST", post(), kOrigins, false));
  EXPECT_FALSE(checkMcpTransport("POST", post("text/event-stream;q=0.5, APPLICATION/JSON"),
                                 kOrigins, false));
  EXPECT_EQ(mcpAcceptMode("application/json, text/event-stream"), McpAccept::kBoth);
  // Plain HTTP clients (httpx and requests send */*; some send nothing): served JSON.
  for (std::string_view accept : {"application/json", "*/*", "", "application/*",
                                  "application/json, text/event-stream;q=0",
                                  "application/json, text/event-stream; q=0.000"}) {
    EXPECT_FALSE(checkMcpTransport("POST", post(accept), kOrigins, false)) << accept;
    EXPECT_EQ(mcpAcceptMode(accept), McpAccept::kJsonOnly) << accept;
  }
  // Nothing the gateway can send.
  for (std::string_view accept : {"text/event-stream", "text/html", "application/json;q=0"}) {
    auto r = checkMcpTransport("POST", post(accept), kOrigins, false);
    ASSERT_TRUE(r) << accept;
    EXPECT_EQ(r->status, 406) << accept;
    EXPECT_EQ(mcpAcceptMode(accept), McpAccept::kNeither) << accept;
  }
}

TEST(McpChecks, GetMustAcceptEventStream) {
  Headers h;
  h.add("accept", "text/event-stream");
  EXPECT_FALSE(checkMcpTransport("GET", h, kOrigins, false));
  h.set("accept", "application/json");
  EXPECT_EQ(checkMcpTransport("GET", h, kOrigins, false)->status, 406);
  EXPECT_FALSE(checkMcpTransport("DELETE", Headers(), kOrigins, false));
}

TEST(McpChecks, ContentTypeMustBeJson) {
  EXPECT_FALSE(checkMcpTransport("POST", post(), kOrigins, false));
  EXPECT_FALSE(checkMcpTransport(
      "POST", post("application/json, text/event-stream", "application/json; charset=utf-8"),
      kOrigins, false));
  for (std::string_view type : {"text/plain", "", "application/jsonl"}) {
    auto r = checkMcpTransport("POST", post("application/json, text/event-stream", type), kOrigins,
                               false);
    ASSERT_TRUE(r) << type;
    EXPECT_EQ(r->status, 415);
  }
}

TEST(McpChecks, ProtocolVersionIsCheckedAfterInitialisation) {
  for (std::string_view v : kMcpProtocolVersions) {
    Headers h = post();
    h.add("mcp-protocol-version", v);
    EXPECT_FALSE(checkMcpTransport("POST", h, kOrigins, false)) << v;
  }
  Headers h = post();
  h.add("mcp-protocol-version", "2024-11-05");
  EXPECT_EQ(checkMcpTransport("POST", h, kOrigins, false)->status, 400);
  EXPECT_FALSE(checkMcpTransport("POST", h, kOrigins, /*initialize=*/true));
  EXPECT_FALSE(checkMcpTransport("POST", post(), kOrigins, false));  // absent: 2025-03-26
}

TEST(McpChecks, OriginComesFirst) {
  Headers h = post("text/plain", "text/plain");
  h.add("origin", "https://evil.example.net");
  auto r = checkMcpTransport("POST", h, kOrigins, false);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_TRUE(mcpOriginAllowed("https://APP.example.com", kOrigins));
  EXPECT_FALSE(mcpOriginAllowed("https://app.example.com.evil.net", kOrigins));
  EXPECT_FALSE(mcpOriginAllowed("null", kOrigins));
  EXPECT_FALSE(mcpOriginAllowed("https://app.example.com", {}));
  EXPECT_TRUE(mcpOriginAllowed("null", {"*"}));
}

TEST(McpChecks, OnlyIdempotentCallsAreRetried) {
  auto call = [](const char* body) { return idempotentMcpCall(peekJsonRpc(body)); };
  EXPECT_TRUE(call(R"({"jsonrpc":"2.0","id":1,"method":"initialize"})"));
  EXPECT_TRUE(call(R"({"jsonrpc":"2.0","id":1,"method":"ping"})"));
  EXPECT_TRUE(call(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})"));
  EXPECT_TRUE(call(R"({"jsonrpc":"2.0","id":1,"method":"resources/templates/list"})"));
  EXPECT_FALSE(call(R"({"jsonrpc":"2.0","id":1,"method":"tools/call"})"));
  EXPECT_FALSE(call(R"({"jsonrpc":"2.0","id":1,"method":"resources/read"})"));
  EXPECT_FALSE(call(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"));
  EXPECT_FALSE(call(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])"));
}

TEST(McpChecks, RecognisesUnknownSessionAnswers) {
  EXPECT_TRUE(mentionsUnknownSession(
      R"({"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null})"));
  EXPECT_FALSE(mentionsUnknownSession(
      R"({"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params"},"id":1})"));
  EXPECT_FALSE(mentionsUnknownSession("session"));
}

}  // namespace
}  // namespace relay::pipeline
