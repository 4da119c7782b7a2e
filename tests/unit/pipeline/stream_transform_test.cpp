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

// The gateway's own path: each read appended straight to the parser's
// buffer (inbox()), then pushInbox().
std::string feedAllInPlace(StreamTransform& t, const std::string& stream, std::size_t piece) {
  std::string out;
  for (std::size_t i = 0; i < stream.size(); i += piece) {
    t.inbox().append(stream, i, piece);
    out += t.pushInbox();
  }
  return out;
}

TEST(StreamTransform, ReadsAppendedInPlaceGiveWhatPushedReadsGive) {
  // Pass-through, the gateway's usage chunk dropped, Moonshot's usage moved
  // out of its choice and given as a chunk before [DONE].
  const std::string streams[] = {kChunk1 + ": keep-alive\n\n" + kChunk1 + kDone,
                                 kChunk1 + kOpenAiUsage + kDone, kChunk1 + kMoonshotLast + kDone};
  for (const std::string& stream : streams) {
    for (bool callerWantsUsage : {false, true}) {
      for (std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{100000}}) {
        StreamTransform pushed(callerWantsUsage);
        StreamTransform inPlace(callerWantsUsage);
        EXPECT_EQ(feedAllInPlace(inPlace, stream, piece), feedAll(pushed, stream, piece));
        EXPECT_EQ(inPlace.sawDone(), pushed.sawDone());
        EXPECT_EQ(inPlace.events(), pushed.events());
        EXPECT_EQ(inPlace.usage().has_value(), pushed.usage().has_value());
        EXPECT_EQ(inPlace.pendingBytes(), 0u);
      }
    }
  }
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

// tests/fuzz/regressions/sse/transform-usage-after-done: Moonshot usage that
// arrives after [DONE] came out as a usage chunk before [DONE] when both were
// in one read, and not when they were in two; and it was forwarded.
TEST(StreamTransform, UsageAfterDoneGivesTheSameStreamInOneReadOrTwo) {
  const std::string beforeDone = kChunk1 + kDone;
  const std::string stream = beforeDone + kMoonshotLast;
  for (bool callerWantsUsage : {false, true}) {
    StreamTransform oneRead(callerWantsUsage);
    const std::string whole(oneRead.push(stream));
    StreamTransform twoReads(callerWantsUsage);
    std::string split(twoReads.push(beforeDone));
    split += twoReads.push(kMoonshotLast);
    EXPECT_EQ(whole, beforeDone) << "callerWantsUsage " << callerWantsUsage;
    EXPECT_EQ(split, beforeDone) << "callerWantsUsage " << callerWantsUsage;
    // The upstream's late usage is still its bill.
    ASSERT_TRUE(oneRead.usage());
    EXPECT_EQ(oneRead.usage(), twoReads.usage());
    EXPECT_EQ(oneRead.usage()->cachedTokens, 4);
    EXPECT_EQ(oneRead.events(), twoReads.events());
    EXPECT_TRUE(oneRead.sawDone());
  }
}

TEST(StreamTransform, ForwardsNothingAfterDone) {
  const std::string stream =
      kChunk1 + kDone + "\n" + kChunk1 + ": keep-alive\n\n" + kOpenAiUsage + kDone + "data: x";
  for (std::size_t piece : {std::size_t{1}, std::size_t{5}, kChunk1.size(), stream.size()}) {
    StreamTransform t(true);
    EXPECT_EQ(feedAll(t, stream, piece), kChunk1 + kDone) << "reads of " << piece;
    EXPECT_EQ(t.events(), 2u);
    ASSERT_TRUE(t.usage());
    EXPECT_EQ(t.usage()->promptTokens, 9);  // read, though not forwarded
  }
}

TEST(StreamTransform, MoonshotUsageChunkCarriesOnlyUsageSeenBeforeDone) {
  // Usage in a choice before [DONE], other usage after it: the chunk before
  // [DONE] says what was known then.
  const std::string stream = kChunk1 + kMoonshotLast + kDone + kOpenAiUsage;
  StreamTransform t(true);
  const std::string out(t.push(stream));
  EXPECT_NE(
      out.find(
          R"("choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":4})"),
      std::string::npos)
      << out;
  EXPECT_TRUE(out.ends_with(kDone));
}

// A chunk with usage both at the top level and in choices[0].
const std::string kUsageInBothPlaces =
    R"(data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"kimi-k2","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}})"
    "\n\n";

TEST(StreamTransform, UsageInBothPlacesReachesOnlyACallerWhoAskedForIt) {
  StreamTransform quiet(false);
  std::string out = feedAll(quiet, kChunk1 + kUsageInBothPlaces + kDone, 1000);
  EXPECT_EQ(out.find("usage"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("finish_reason":"stop")"), std::string::npos) << out;
  ASSERT_TRUE(quiet.usage());
  EXPECT_EQ(quiet.usage()->totalTokens, 11);

  // A caller who asked gets it once, in OpenAI's place, and no extra chunk.
  StreamTransform asked(true);
  out = feedAll(asked, kChunk1 + kUsageInBothPlaces + kDone, 1000);
  EXPECT_NE(out.find(R"("finish_reason":"stop"}],"usage":{"prompt_tokens":9)"), std::string::npos)
      << out;
  const std::size_t first = out.find("\"usage\"");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(out.find("\"usage\"", first + 1), std::string::npos) << out;
}

TEST(StreamTransform, TopLevelUsageBesideChoicesIsRemovedForAQuietCaller) {
  const std::string chunk =
      R"(data: {"id":"c1","object":"chat.completion.chunk","created":7,"model":"kimi-k2","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}})"
      "\n\n";
  StreamTransform quiet(false);
  EXPECT_EQ(feedAll(quiet, chunk + kDone, 1000), kChunk1 + kDone);
  StreamTransform asked(true);
  EXPECT_EQ(feedAll(asked, chunk + kDone, 1000), chunk + kDone);
}

// Each event of `stream` (blank-line separated) in a read of its own.
std::string eventByEvent(StreamTransform& t, const std::string& stream) {
  std::string out;
  for (std::size_t at = 0; at < stream.size();) {
    const std::size_t next = std::min(stream.find("\n\n", at) + 2, stream.size());
    out += t.push(stream.substr(at, next - at));
    at = next;
  }
  return out;
}

// Events dropped or shortened in a read that holds several of them are
// edited in place in the parser's buffer (without copying the read): the
// caller gets the same bytes as when each event comes in a read of its
// own, and the bytes of an event still incomplete at the end of the read
// are left intact for the next read.
TEST(StreamTransform, EditsInOneReadGiveWhatEventByEventReadsGive) {
  // A quiet caller: Moonshot's usage taken out of two chunks, the usage chunk
  // the gateway asked for dropped, [DONE] kept — three edits, none longer.
  const std::string stream =
      kChunk1 + kMoonshotLast + kChunk1 + kMoonshotLast + kOpenAiUsage + kChunk1 + kDone;
  StreamTransform reference(false);
  const std::string expected = eventByEvent(reference, stream);
  EXPECT_EQ(expected.find("usage"), std::string::npos) << expected;
  EXPECT_EQ(expected.find(kChunk1), 0u);
  EXPECT_TRUE(expected.ends_with(kChunk1 + kDone)) << expected;

  StreamTransform whole(false);
  EXPECT_EQ(std::string(whole.push(stream)), expected);
  EXPECT_EQ(whole.usage(), reference.usage());
  EXPECT_EQ(whole.events(), reference.events());

  // The same with the read ending inside an event: the tail waits, intact.
  const std::size_t cut = stream.size() - kDone.size() - 30;
  StreamTransform split(false);
  std::string out(split.push(stream.substr(0, cut)));
  out += split.push(stream.substr(cut));
  EXPECT_EQ(out, expected);
}

// More edits in one read than are held without an allocation, and an edit
// that makes the read longer (the usage chunk a caller who asked for usage
// gets before [DONE]): the read is rebuilt by copying, with the same result.
TEST(StreamTransform, ManyEditsAndALongerReadGiveWhatEventByEventReadsGive) {
  std::string stream;
  for (int i = 0; i < 6; ++i)
    stream += kChunk1 + kMoonshotLast;
  stream += kDone;
  for (bool callerWantsUsage : {false, true}) {
    StreamTransform reference(callerWantsUsage);
    const std::string expected = eventByEvent(reference, stream);
    StreamTransform whole(callerWantsUsage);
    EXPECT_EQ(std::string(whole.push(stream)), expected) << "callerWantsUsage " << callerWantsUsage;
    EXPECT_EQ(whole.usage(), reference.usage());
    // Moonshot's usage: out of all six chunks, and for a caller who asked,
    // once before [DONE].
    const std::size_t first = expected.find("\"usage\"");
    if (callerWantsUsage) {
      ASSERT_NE(first, std::string::npos);
      EXPECT_EQ(expected.find("\"usage\"", first + 1), std::string::npos) << expected;
      EXPECT_LT(first, expected.find("data: [DONE]"));
    } else {
      EXPECT_EQ(first, std::string::npos) << expected;
    }
  }
}

// A replacement can be longer than its event: data split over many lines
// without the optional space after "data:" is written back with it, one
// byte more per line, which here outweighs the usage taken out. Such a read
// is rebuilt by copying, with the shortening edits in it too.
TEST(StreamTransform, AReplacementLongerThanItsEventIsCopied) {
  std::string longEvent =
      R"(data:{"id":"c1","object":"chat.completion.chunk","created":7,"model":"kimi-k2","n":[0)"
      "\n";
  for (int i = 1; i < 150; ++i)
    longEvent += "data:," + std::to_string(i % 10) + "\n";
  longEvent +=
      R"(data:],"choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}]})"
      "\n\n";
  StreamTransform alone(false);
  const std::string replaced(alone.push(longEvent));
  ASSERT_GT(replaced.size(), longEvent.size()) << "the edit must lengthen its event";
  EXPECT_EQ(replaced.find("usage"), std::string::npos) << replaced;
  ASSERT_TRUE(alone.usage());
  EXPECT_EQ(alone.usage()->totalTokens, 11);

  const std::string stream = kChunk1 + kMoonshotLast + longEvent + kOpenAiUsage + kChunk1 + kDone;
  StreamTransform reference(false);
  const std::string expected = eventByEvent(reference, stream);
  EXPECT_NE(expected.find(replaced), std::string::npos);
  StreamTransform whole(false);
  EXPECT_EQ(std::string(whole.push(stream)), expected);
  EXPECT_EQ(whole.usage(), reference.usage());
}

TEST(StreamTransform, AnOversizedEventFailsTheStream) {
  StreamTransform t(false);
  std::string huge = "data: " + std::string(17u << 20, 'x');
  EXPECT_EQ(t.push(huge), "");
  EXPECT_TRUE(t.failed());
}

}  // namespace
}  // namespace relay::pipeline
