// The fields of a chat request the mock reads, and the inputs of its
// documented usage formula (prompt_tokens = max(1, ceil(code points / 4))).
#include "chat_request.hpp"

#include <gtest/gtest.h>

#include "replies.hpp"

namespace relay::mock {
namespace {

TEST(ChatRequestTest, ReadsTheFieldsTheMockNeeds) {
  ChatRequestResult r = parseChatRequest(R"({
    "model": "kimi-k2", "stream": true, "stream_options": {"include_usage": true},
    "max_tokens": 9, "max_completion_tokens": 7,
    "metadata": {"model": "decoy", "messages": [{"role": "user", "content": "decoy"}]},
    "messages": [
      {"role": "system", "content": "be brief"},
      {"content": [{"type": "text", "text": "héllo"}, {"type": "image_url", "image_url": {"url": "x"}}],
       "role": "user"},
      {"role": "assistant", "content": null}
    ]})");
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.request.model, "kimi-k2");
  EXPECT_TRUE(r.request.stream);
  EXPECT_TRUE(r.request.includeUsage);
  EXPECT_EQ(r.request.maxTokens, 7u);
  EXPECT_EQ(r.request.messageCount, 3u);
  EXPECT_EQ(r.request.contentChars, 8u + 5u);  // "be brief" + "héllo" in code points
  EXPECT_EQ(r.request.lastUserContent, "héllo");
}

TEST(ChatRequestTest, RejectsWhatAnUpstreamWould) {
  EXPECT_EQ(parseChatRequest(R"({"messages":[{"role":"user","content":"x"}]})").param, "model");
  EXPECT_EQ(parseChatRequest(R"({"model":"m"})").param, "messages");
  EXPECT_EQ(parseChatRequest(R"({"model":"m","messages":"hi"})").param, "messages");
  EXPECT_EQ(parseChatRequest(R"({"model":"m","messages":[]})").param, "messages");
  EXPECT_FALSE(parseChatRequest(R"({"model":"m",)").ok());
  EXPECT_FALSE(parseChatRequest(R"([{"model":"m"}])").ok());
  EXPECT_FALSE(parseChatRequest(R"("m")").ok());
  EXPECT_FALSE(
      parseChatRequest(R"({"model":"m","messages":[{"role":"user","content":"x"}]} x)").ok());
}

TEST(ChatRequestTest, EchoIsTruncatedOnCodePoints) {
  EXPECT_EQ(makeEcho(""), "mock reply");
  EXPECT_EQ(makeEcho("abc", 2), "ab");
  EXPECT_EQ(makeEcho("ééé", 2), "éé");
  EXPECT_EQ(makeEcho("ab", 2), "ab");
}

TEST(RepliesTest, StreamDeltasConcatenateToTheWholeAnswer) {
  CompletionPlan plan{"chatcmpl-mock-1", 1, "kimi-k2", "hi \"there\"", {3, 3, 0}, "stop"};
  std::string whole = completionBody(Flavor::kOpenAi, plan);
  EXPECT_NE(whole.find(R"("content":"hi \"there\" 1 2")"), std::string::npos) << whole;
  EXPECT_NE(whole.find(R"("total_tokens":6)"), std::string::npos) << whole;
  ChunkBuilder builder(Flavor::kOpenAi, plan, true);
  EXPECT_EQ(builder.content(2),
            "data: {\"id\":\"chatcmpl-mock-1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
            "\"model\":\"kimi-k2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" 2\"},"
            "\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n");
  const std::string& tail = builder.tail();
  EXPECT_NE(tail.find(R"("choices":[],"usage":{"prompt_tokens":3)"), std::string::npos) << tail;
  EXPECT_TRUE(tail.ends_with("data: [DONE]\n\n"));
}

TEST(RepliesTest, MoonshotPutsUsageInTheLastChoice) {
  CompletionPlan plan{"chatcmpl-mock-2", 1, "kimi-k2", "x", {4, 1, 2}, "stop"};
  ChunkBuilder builder(Flavor::kMoonshot, plan, true);
  EXPECT_EQ(builder.content(0).find("usage"), std::string::npos);
  const std::string& tail = builder.tail();
  EXPECT_NE(
      tail.find(
          R"("finish_reason":"stop","usage":{"prompt_tokens":4,"completion_tokens":1,"total_tokens":5,"cached_tokens":2}}])"),
      std::string::npos)
      << tail;
  EXPECT_EQ(tail.find("\"choices\":[]"), std::string::npos);
}

TEST(RepliesTest, ErrorShapes) {
  EXPECT_EQ(
      errorBody(Flavor::kOpenAi, 429, {"slow down"}),
      R"({"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}})");
  EXPECT_EQ(
      errorBody(Flavor::kOpenAi, 401, {"no key", {}, {}, std::string_view()}),
      R"({"error":{"message":"no key","type":"invalid_request_error","param":null,"code":null}})");
  EXPECT_EQ(
      errorBody(Flavor::kOpenAi, 429, {"quota", "insufficient_quota"}),
      R"({"error":{"message":"quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}})");
  EXPECT_EQ(errorBody(Flavor::kMoonshot, 429, {"slow down"}),
            R"({"error":{"type":"rate_limit_reached_error","message":"slow down"}})");
  EXPECT_EQ(errorBody(Flavor::kMoonshot, 503, {"x"}),
            R"({"error":{"type":"server_error","message":"x"}})");
}

}  // namespace
}  // namespace relay::mock
