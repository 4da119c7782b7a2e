#include "relay/common/chat_request.hpp"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace relay {
namespace {

// A realistic ~300-byte body with fields the gateway does not know.
constexpr std::string_view kBody =
    R"({"model": "kimi-k2",
  "messages": [{"role": "system", "content": "Be brief."},
               {"role": "user", "content": "Say \"hi\" in 3 languages \u00e9."}],
  "temperature": 0.6, "stream": true, "max_tokens": 256,
  "partial": false, "thinking": {"type": "enabled"}, "x-unknown": [1, 2.50, null]})";

ChatRequestFields read(std::string_view body) {
  ChatRequestFields fields;
  const auto error = readChatRequest(body, fields);
  EXPECT_FALSE(error) << (error ? error->message : "");
  return fields;
}

ChatRequestError refuse(std::string_view body) {
  ChatRequestFields fields;
  const auto error = readChatRequest(body, fields);
  EXPECT_TRUE(error) << body;
  return error.value_or(ChatRequestError{});
}

std::string rewrite(std::string_view body, ChatRewrite what) {
  const ChatRequestFields fields = read(body);
  std::string out;
  rewriteChatRequest(body, fields, what, out);
  EXPECT_FALSE(validateJson(out)) << out;
  return out;
}

TEST(ChatRequest, ReadsTheFieldsTheGatewayUses) {
  const ChatRequestFields f = read(kBody);
  EXPECT_EQ(f.model, "kimi-k2");
  EXPECT_EQ(f.modelValue.in(kBody), R"("kimi-k2")");
  EXPECT_TRUE(f.stream);
  EXPECT_EQ(f.includeUsage, std::nullopt);
  EXPECT_EQ(f.maxTokens, 256);
  EXPECT_EQ(f.maxCompletionTokens, std::nullopt);
  EXPECT_EQ(f.messages.in(kBody).front(), '[');
  EXPECT_EQ(f.messages.in(kBody).back(), ']');
  // system, Be brief., user, and the raw (escaped) user content.
  EXPECT_EQ(f.messageTextBytes,
            6 + 9 + 4 + std::string_view(R"(Say \"hi\" in 3 languages \u00e9.)").size());
}

TEST(ChatRequest, NullMeansAbsent) {
  const ChatRequestFields f = read(
      R"({"model":"m","messages":[{}],"stream":null,"stream_options":null,"max_tokens":null,"max_completion_tokens":7})");
  EXPECT_FALSE(f.stream);
  EXPECT_EQ(f.includeUsage, std::nullopt);
  EXPECT_EQ(f.maxTokens, std::nullopt);
  EXPECT_EQ(f.maxCompletionTokens, 7);
}

TEST(ChatRequest, DecodesAnEscapedModelAndKey) {
  const ChatRequestFields f = read(R"({"mod\u0065l":"kimi\u002dk2","messages":[1]})");
  EXPECT_EQ(f.model, "kimi-k2");
}

TEST(ChatRequest, RefusesMalformedJsonSayingWhereAndWhat) {
  const ChatRequestError e = refuse(R"({"model":"m","messages":[1,]})");
  EXPECT_NE(e.message.find("at byte 27: expected a JSON value, found ']'"), std::string::npos)
      << e.message;
  EXPECT_EQ(e.param, "");
  EXPECT_NE(refuse("[]").message.find("'{' (a JSON object)"), std::string::npos);
}

TEST(ChatRequest, RefusesMissingOrMistypedFields) {
  const struct {
    std::string_view body;
    std::string_view param;
    std::string_view says;
  } cases[] = {
      {R"({"messages":[1]})", "model", "you must provide a model parameter"},
      {R"({"model":null,"messages":[1]})", "model", "you must provide a model"},
      {R"({"model":7,"messages":[1]})", "model", "expected a string, but got number"},
      {R"({"model":"","messages":[1]})", "model", "must not be empty"},
      {R"({"model":"m"})", "messages", "Missing required parameter: 'messages'"},
      {R"({"model":"m","messages":{}})", "messages", "expected an array, but got object"},
      {R"({"model":"m","messages":[ ]})", "messages", "empty array"},
      {R"({"model":"m","messages":[1],"stream":"true"})", "stream", "expected a boolean"},
      {R"({"model":"m","messages":[1],"stream_options":true})", "stream_options", "an object"},
      {R"({"model":"m","messages":[1],"stream_options":{"include_usage":1}})",
       "stream_options.include_usage", "a boolean"},
      {R"({"model":"m","messages":[1],"max_tokens":1.5})", "max_tokens", "an integer"},
      {R"({"model":"m","messages":[1],"max_tokens":"9"})", "max_tokens", "an integer"},
      {R"({"model":"m","messages":[1],"max_completion_tokens":-1})", "max_completion_tokens",
       ">= 0"},
      {R"({"model":"m","messages":[1],"model":"n"})", "model", "Duplicate key 'model'"},
      {R"({"model":"m","messages":[1],"mod\u0065l":"n"})", "model", "Duplicate key"},
      {R"({"model":"m","messages":[1],"stream":true,"stream":false})", "stream", "Duplicate"},
      {R"({"model":"m","messages":[1],"max_tokens":null,"max_tokens":5})", "max_tokens",
       "Duplicate key 'max_tokens'"},
      {R"({"model":"m","messages":[1],"stream_options":null,"stream_options":{}})",
       "stream_options", "Duplicate"},
      // Checked in the order of the fields: model, messages, stream, ...
      {R"({"messages":[1],"messages":[2]})", "model", "you must provide a model"},
      {R"({"model":"m","stream":1,"stream":2})", "messages", "Missing required parameter"},
      {R"({"model":"m","messages":[1],"stream_options":{"include_usage":true,"include_usage":false}})",
       "stream_options.include_usage", "Duplicate"},
  };
  for (const auto& c : cases) {
    const ChatRequestError e = refuse(c.body);
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.body << " -> " << e.message;
  }
}

TEST(ChatRequest, RewriteReplacesOnlyTheModelValue) {
  const std::string out = rewrite(kBody, {.model = "kimi-k2-0905-preview"});
  std::string expected(kBody);
  expected.replace(kBody.find("kimi-k2"), 7, "kimi-k2-0905-preview");
  EXPECT_EQ(out, expected);  // every other byte, spacing and "2.50" included
  auto a = nlohmann::json::parse(out);
  auto b = nlohmann::json::parse(kBody);
  a.erase("model");
  b.erase("model");
  EXPECT_EQ(a, b);
}

TEST(ChatRequest, RewriteEscapesAModelThatNeedsIt) {
  const std::string out = rewrite(R"({"model":"m","messages":[1]})", {.model = "a\"b\\c\n"});
  EXPECT_EQ(out, R"({"model":"a\"b\\c\n","messages":[1]})");
  EXPECT_EQ(nlohmann::json::parse(out)["model"], "a\"b\\c\n");
}

TEST(ChatRequest, RewriteWithNothingToDoCopiesTheBody) {
  EXPECT_EQ(rewrite(kBody, {}), kBody);
  // Usage is only forced on streamed requests.
  const std::string_view unstreamed = R"({"model":"m","messages":[1],"stream":false})";
  EXPECT_EQ(rewrite(unstreamed, {.forceIncludeUsage = true}), unstreamed);
}

TEST(ChatRequest, RewriteTurnsIncludeUsageOnWhereverItStands) {
  const ChatRewrite force{.forceIncludeUsage = true};
  const auto body = [](std::string_view tail) {
    return R"({"model":"m","messages":[1],"stream":true)" + std::string(tail) + "}";
  };
  EXPECT_EQ(rewrite(body(""), force), body(R"(,"stream_options":{"include_usage":true})"));
  EXPECT_EQ(rewrite(body(R"(,"stream_options":null)"), force),
            body(R"(,"stream_options":{"include_usage":true})"));
  EXPECT_EQ(rewrite(body(R"(,"stream_options":{ })"), force),
            body(R"(,"stream_options":{"include_usage":true })"));
  EXPECT_EQ(rewrite(body(R"(,"stream_options":{"x":1})"), force),
            body(R"(,"stream_options":{"x":1,"include_usage":true})"));
  EXPECT_EQ(rewrite(body(R"(,"stream_options":{"include_usage": false,"x":1})"), force),
            body(R"(,"stream_options":{"include_usage": true,"x":1})"));
  EXPECT_EQ(rewrite(body(R"(,"stream_options":{"include_usage":null})"), force),
            body(R"(,"stream_options":{"include_usage":true})"));
  EXPECT_EQ(rewrite(body(R"(,"stream_options":{"include_usage":true})"), force),
            body(R"(,"stream_options":{"include_usage":true})"));
}

TEST(ChatRequest, RewriteDoesModelAndUsageTogether) {
  const std::string_view in = "{\"stream\":true,\"model\":\"m\",\"messages\":[1]\n}";
  EXPECT_EQ(
      rewrite(in, {.model = "up", .forceIncludeUsage = true}),
      "{\"stream\":true,\"model\":\"up\",\"messages\":[1],\"stream_options\":{\"include_usage\":"
      "true}\n}");
}

}  // namespace
}  // namespace relay
