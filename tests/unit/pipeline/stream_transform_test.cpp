// What the caller receives of an upstream SSE stream: whole events only,
// usage hidden or re-emitted as the caller asked, every other byte unchanged.
#include "relay/pipeline/stream_transform.hpp"

#include <gtest/gtest.h>

namespace relay::pipeline {
namespace {

const std::string kChunk1 =
    R"(data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"kimi-k2","choices":[{"index":0,"delta":{"content":"hi"}}]})"
    "\n\n";
const std::string kOpenAiUsage =
    R"(data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"kimi-k2","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}})"
    "\n\n";
const std::string kMoonshotLast =
    R"(data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"kimi-k2","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"cached_tokens":4}}]})"
    "\n\n";
const std::string kDone = "data: [DONE]\n\n";

std::string feedAll(StreamTransform& t, const std::string& stream, std::size_t piece) {
  std::string out;
  for (std::size_t i = 0; i < stream.size(); i += piece)
    out += t.push(stream.substr(i, piece));
  return out;
}

TEST(StreamTransform, PassesEventsThroughWholeAndUnchanged) {
  StreamTransform t(false);
  const std::string stream = kChunk1 + ": keep-alive\n\n" + kChunk1 + kDone;
  EXPECT_EQ(feedAll(t, stream, 7), stream);  // split at odd places, rejoined exactly
  EXPECT_TRUE(t.sawDone());
  EXPECT_EQ(t.events(), 3u);
  EXPECT_EQ(t.pendingBytes(), 0u);
}

TEST(StreamTransform, NeverEmitsAPartialEvent) {
  StreamTransform t(false);
  std::string out(t.push(kChunk1.substr(0, 20)));
  EXPECT_EQ(out, "");
  EXPECT_GT(t.pendingBytes(), 0u);  // an upstream cut here leaves nothing half-sent
}

TEST(StreamTransform, HidesTheUsageChunkTheGatewayAskedFor) {
  StreamTransform t(false);
  const std::string out = feedAll(t, kChunk1 + kOpenAiUsage + kDone, 1000);
  EXPECT_EQ(out, kChunk1 + kDone);
  ASSERT_TRUE(t.usage());
  EXPECT_EQ(t.usage()->promptTokens, 9);
  EXPECT_EQ(t.usage()->completionTokens, 2);
}

TEST(StreamTransform, KeepsTheUsageChunkTheCallerAskedFor) {
  StreamTransform t(true);
  const std::string stream = kChunk1 + kOpenAiUsage + kDone;
  EXPECT_EQ(feedAll(t, stream, 1000), stream);
  ASSERT_TRUE(t.usage());
}

TEST(StreamTransform, MovesMoonshotUsageOutOfTheChoice) {
  // A caller who did not ask: the usage is read, and removed from the chunk.
  StreamTransform quiet(false);
  std::string out = feedAll(quiet, kChunk1 + kMoonshotLast + kDone, 1000);
  EXPECT_EQ(out.find("usage"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("finish_reason":"stop")"), std::string::npos);
  ASSERT_TRUE(quiet.usage());
  EXPECT_EQ(quiet.usage()->cachedTokens, 4);

  // A caller who asked: one OpenAI-style usage chunk, just before [DONE].
  StreamTransform asked(true);
  out = feedAll(asked, kChunk1 + kMoonshotLast + kDone, 1000);
  const std::size_t usageChunk = out.find(R"("choices":[],"usage":{"prompt_tokens":9)");
  ASSERT_NE(usageChunk, std::string::npos) << out;
  EXPECT_LT(usageChunk, out.find("data: [DONE]"));
  EXPECT_EQ(out.find(R"("finish_reason":"stop","usage")"), std::string::npos)
      << "usage appears once, in OpenAI's place";
}

TEST(StreamTransform, AnOversizedEventFailsTheStream) {
  StreamTransform t(false);
  std::string huge = "data: " + std::string(17u << 20, 'x');
  EXPECT_EQ(t.push(huge), "");
  EXPECT_TRUE(t.failed());
}

}  // namespace
}  // namespace relay::pipeline
