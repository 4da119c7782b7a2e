#include "relay/sse/usage.hpp"

#include <string>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace relay::sse {
namespace {

constexpr std::string_view kOrdinaryChunk =
    R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null})";

constexpr std::string_view kOpenAiUsageChunk =
    R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1718000000,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":12,"total_tokens":32,"prompt_tokens_details":{"cached_tokens":8,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":5}}})";

constexpr std::string_view kMoonshotLastChunk =
    R"({"id":"cmpl-9","object":"chat.completion.chunk","created":1718000001,"model":"kimi-k2-0905-preview","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":100,"completion_tokens":30,"total_tokens":130,"cached_tokens":64}}]})";

TEST(Usage, OrdinaryChunksAreSkippedWithoutParsing) {
  EXPECT_FALSE(mayContainUsage(kOrdinaryChunk));
  EXPECT_FALSE(mayContainUsage(R"({"usage" : null})"));
  EXPECT_FALSE(mayContainUsage(R"({"choices":[]})"));
  // The word inside a string value is escaped, so it never looks like a key.
  EXPECT_FALSE(mayContainUsage(R"({"content":"\"usage\": {"})"));
  EXPECT_TRUE(mayContainUsage(R"({"usage" :
 {}})"));
  EXPECT_EQ(extractUsage(kOrdinaryChunk), std::nullopt);
}

// The pre-check looks for the key's 'g' first: the key at every offset of
// payloads of many lengths, and every near miss around a 'g', still answers
// as a plain search would.
TEST(Usage, PreCheckFindsTheKeyWhereverItIs) {
  for (std::size_t before = 0; before < 40; ++before) {
    for (std::size_t after = 0; after < 20; ++after) {
      const std::string pad(before, 'x'), tail(after, 'y');
      EXPECT_TRUE(mayContainUsage(pad + R"("usage":{)" + tail)) << before << " " << after;
      EXPECT_TRUE(mayContainUsage(pad + "\"u\"u\"usage\" :\n{" + tail)) << before << " " << after;
      EXPECT_FALSE(mayContainUsage(pad + R"("usage":[)" + tail)) << before << " " << after;
      EXPECT_FALSE(mayContainUsage(pad + R"("usagE":{)" + tail)) << before << " " << after;
      EXPECT_FALSE(mayContainUsage(pad + "\"u\"u\"u" + tail)) << before << " " << after;
    }
  }
  EXPECT_FALSE(mayContainUsage(""));
  EXPECT_FALSE(mayContainUsage("g"));
  EXPECT_FALSE(mayContainUsage(R"("usage")"));
  EXPECT_FALSE(mayContainUsage(R"("usage":)"));
  EXPECT_TRUE(mayContainUsage(R"("usage":{)"));
  EXPECT_TRUE(mayContainUsage(R"({"logprobs":"gggg","usage":{"x":1}})"));
  EXPECT_TRUE(mayContainUsage(R"({"a":"usag","b":"usage","usage":{}})"));
  EXPECT_FALSE(mayContainUsage(R"({"usages":{},"xusage":{},"usage_":{}})"));
  EXPECT_FALSE(mayContainUsage(R"({"usage"x{}})"));
  EXPECT_TRUE(mayContainUsage(std::string(5000, 'g') + R"("usage" : {})"));
  EXPECT_FALSE(mayContainUsage(std::string(5000, 'g') + R"("usage" : [])"));

  // The key at every offset of payloads of every length up to 80, among
  // bytes that match it in part, answers as a plain search does.
  auto plain = [](std::string_view s) {
    for (std::size_t at = s.find("\"usage\""); at != std::string_view::npos;
         at = s.find("\"usage\"", at + 1)) {
      std::size_t p = s.find_first_not_of(" \t\r\n", at + 7);
      if (p == std::string_view::npos || s[p] != ':') continue;
      p = s.find_first_not_of(" \t\r\n", p + 1);
      if (p != std::string_view::npos && s[p] == '{') return true;
    }
    return false;
  };
  const std::string filler = R"("u"ug"usag"usa"g"uuu)";
  for (std::size_t length = 0; length <= 80; ++length) {
    std::string background;
    while (background.size() < length)
      background += filler;
    background.resize(length);
    ASSERT_EQ(mayContainUsage(background), plain(background)) << background;
    for (std::string_view key : {R"("usage":{)", R"("usage" :  {)", R"("usage":null)"}) {
      for (std::size_t at = 0; at + key.size() <= length; ++at) {
        std::string s = background;
        s.replace(at, key.size(), key);
        ASSERT_EQ(mayContainUsage(s), plain(s)) << s;
        ASSERT_EQ(mayContainUsage(s), key.back() == '{') << s;
      }
    }
  }
}

TEST(Usage, ReadsOpenAisUsageOnlyChunk) {
  const auto found = extractUsage(kOpenAiUsageChunk);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->place, UsagePlace::kTopLevel);
  EXPECT_TRUE(found->usageOnlyChunk);
  EXPECT_EQ(found->usage, (Usage{.promptTokens = 20,
                                 .completionTokens = 12,
                                 .totalTokens = 32,
                                 .cachedTokens = 8,
                                 .reasoningTokens = 5}));
}

TEST(Usage, ReadsMoonshotsUsageInTheFirstChoice) {
  const auto found = extractUsage(kMoonshotLastChunk);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->place, UsagePlace::kFirstChoice);
  EXPECT_FALSE(found->usageOnlyChunk);
  EXPECT_EQ(found->usage, (Usage{.promptTokens = 100,
                                 .completionTokens = 30,
                                 .totalTokens = 130,
                                 .cachedTokens = 64,
                                 .reasoningTokens = 0}));
}

TEST(Usage, PrefersPromptTokensDetailsAndFillsTheTotal) {
  const auto found = extractUsage(
      R"({"choices":[{"usage":{"prompt_tokens":10,"completion_tokens":4,"cached_tokens":1,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":null}}]})");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->usage.cachedTokens, 3);
  EXPECT_EQ(found->usage.totalTokens, 14);
  EXPECT_EQ(found->usage.reasoningTokens, 0);
}

// Found by fuzz_sse: a prompt_tokens of INT64_MAX without total_tokens made
// the total overflow (UBSan: signed integer overflow in readUsage). Counts are
// clamped to [0, kMaxUsageTokens], so the settlement's sums and unsigned
// casts cannot overflow or wrap either.
TEST(Usage, ClampsNegativeAndHugeCounts) {
  const auto huge = extractUsage(
      R"({"choices":[],"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":1}})");
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->usage.promptTokens, kMaxUsageTokens);
  EXPECT_EQ(huge->usage.completionTokens, 1);
  EXPECT_EQ(huge->usage.totalTokens, kMaxUsageTokens);  // the sum, clamped

  const auto negative = extractUsage(
      R"({"choices":[{"usage":{"prompt_tokens":-5,"completion_tokens":-9223372036854775808,)"
      R"("total_tokens":-1,"cached_tokens":-2,"completion_tokens_details":{"reasoning_tokens":-3}}}]})");
  ASSERT_TRUE(negative);
  EXPECT_EQ(negative->usage, Usage{});

  EXPECT_EQ(extractBodyUsage(R"({"usage":{"prompt_tokens":7,"total_tokens":1e400}})"),
            (Usage{.promptTokens = 7, .totalTokens = 7}));
}

TEST(Usage, ReadsANonStreamedCompletion) {
  const auto found = extractUsage(R"({
    "id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "kimi",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "usage"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}
  })");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->place, UsagePlace::kTopLevel);
  EXPECT_FALSE(found->usageOnlyChunk);
  EXPECT_EQ(found->usage.totalTokens, 11);
}

TEST(Usage, IgnoresMalformedPayloadsAndMistypedUsage) {
  EXPECT_EQ(extractUsage(R"({"usage":{"prompt_tokens":1})"), std::nullopt);  // truncated
  EXPECT_EQ(extractUsage(R"({"usage":{"prompt_tokens":1}} x)"), std::nullopt);
  EXPECT_EQ(extractUsage(R"([{"usage":{}}])"), std::nullopt);
  const auto odd = extractUsage(R"({"usage":{"prompt_tokens":"7","completion_tokens":2.5}})");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->usage.promptTokens, 0);
  EXPECT_EQ(odd->usage.completionTokens, 0);
}

// The one-pass reader takes the common shape and answers as the general
// reader does; anything else it leaves to the general reader (npos).
TEST(Usage, OnePassReaderAgreesWithTheGeneralReaderOrStepsAside) {
  auto both = [](std::string_view text) {
    Usage quick, general;
    const std::size_t end = readUsageQuick(text, 0, quick);
    const bool valid = readUsageObject(text, 0, text.size(), general);
    return std::tuple(end, quick, valid, general);
  };
  const std::string_view openAi =
      R"({"prompt_tokens":20,"completion_tokens":12,"total_tokens":32,"prompt_tokens_details":{"cached_tokens":8,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":5}})";
  auto [end, quick, valid, general] = both(openAi);
  EXPECT_EQ(end, openAi.size());
  EXPECT_TRUE(valid);
  EXPECT_EQ(quick, general);
  EXPECT_EQ(quick, (Usage{20, 12, 32, 8, 5}));

  // First member of a name wins, whatever its type (the general reader's rule);
  // a details member that is not an object leaves Moonshot's cached_tokens.
  const std::string_view dup =
      R"({ "prompt_tokens" : null , "prompt_tokens": 7, "completion_tokens":1.5e2,"cached_tokens":3,"prompt_tokens_details":null,"prompt_tokens_details":{"cached_tokens":9}} )";
  std::tie(end, quick, valid, general) = both(dup.substr(0, dup.size() - 1));
  EXPECT_NE(end, std::string_view::npos);
  EXPECT_EQ(quick, general);
  EXPECT_EQ(quick, (Usage{0, 0, 0, 3, 0}));

  // Counts read on the way agree with the general reader at every edge: 18
  // and 19 digits, int64's end and past it, signs, fractions, exponents,
  // and keys that extend or cut short a known name.
  for (
      std::string_view counts :
      {R"({"prompt_tokens":999999999999999999,"completion_tokens":1000000000000000000})",
       R"({"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775808})",
       R"({"prompt_tokens":-3,"completion_tokens":-0,"total_tokens":0})",
       R"({"prompt_tokens":2.0,"completion_tokens":3e1,"total_tokens":4E+0})",
       R"({"prompt_tokens_x":5,"prompt_token":6,"prompt_tokens":7})",
       R"({"completion_tokens_detail":{"reasoning_tokens":1},"completion_tokens":2})",
       R"({ "total_tokens"  :  12 , "cached_tokens":3 })",
       // a byte off a known name, at its length (names are told apart by
       // length first, then compared)
       R"({"cached_tokenz":1,"prompt_tokenz":2,"total_tokenx":3,"completion_tokenx":4,"prompt_tokens_detailz":{"cached_tokens":5},"completion_tokens_detailx":{"reasoning_tokens":6}})"}) {
    std::tie(end, quick, valid, general) = both(counts);
    EXPECT_EQ(end, counts.size()) << counts;
    EXPECT_TRUE(valid) << counts;
    EXPECT_EQ(quick, general) << counts;
  }
  std::tie(end, quick, valid, general) = both(R"({"prompt_tokens":7,"total_tokens":18})");
  EXPECT_EQ(quick, (Usage{7, 0, 18, 0, 0}));

  // Stepping aside: an escaped key (it may spell a count's name), a string
  // value, a deeper object, invalid JSON — and not at '{'.
  for (std::string_view other :
       {R"({"prompt_tok\u0065ns":5})", R"({"prompt_tokens":"5"})",
        R"({"prompt_tokens_details":{"x":{"cached_tokens":1}}})", R"({"prompt_tokens":05})",
        R"({"prompt_tokens":5,})", R"({"prompt_tokens":5)", R"({"a":tru})", R"([1])",
        "{\"caf\xC3\xA9\":1}",
        // the same inside the first eight bytes of a longer key
        R"({"p\u0072ompt_tokens":5})", "{\"pr\x01mpt_tokens\":5}", "{\"prom\xC3\xA9t_tokens\":5}",
        // and in the last bytes of a key past its last whole word of eight
        "{\"prompt_token\x01\":5}", R"({"prompt_tokens\"":5})", "{\"completion_token\xC3\xA9\":5}",
        // a known name not followed by its colon
        R"({"prompt_tokens" 5})", R"({"total_tokens"})"}) {
    Usage untouched{1, 2, 3, 4, 5};
    EXPECT_EQ(readUsageQuick(other, 0, untouched), std::string_view::npos) << other;
    EXPECT_EQ(untouched, (Usage{1, 2, 3, 4, 5}));
  }
  // Where the general reader decides, the answer is the same as before.
  EXPECT_EQ(extractUsage(R"({"usage":{"prompt_tok\u0065ns":5,"completion_tokens":"x"}})")->usage,
            (Usage{5, 0, 5, 0, 0}));
}

TEST(Usage, ReadsTheStreamIdentityAndBuildsAUsageChunk) {
  ChunkIdentity identity;
  ASSERT_TRUE(readChunkIdentity(kMoonshotLastChunk, identity));
  EXPECT_EQ(identity.id, "cmpl-9");
  EXPECT_EQ(identity.created, 1718000001);
  EXPECT_EQ(identity.model, "kimi-k2-0905-preview");
  EXPECT_FALSE(readChunkIdentity(R"({"id":"x","model":"m"})", identity));

  const Usage usage{.promptTokens = 100,
                    .completionTokens = 30,
                    .totalTokens = 130,
                    .cachedTokens = 64,
                    .reasoningTokens = 7};
  std::string out;
  appendUsageChunk(out, identity, usage);
  EXPECT_EQ(
      out,
      R"({"id":"cmpl-9","object":"chat.completion.chunk","created":1718000001,"model":"kimi-k2-0905-preview","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":30,"total_tokens":130,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":7}}})");
  // It reads back as the same usage, in OpenAI's place for it.
  const auto found = extractUsage(out);
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->usageOnlyChunk);
  EXPECT_EQ(found->usage, usage);

  identity.id = "a\"b";
  out.clear();
  appendUsageChunk(out, identity, usage);
  EXPECT_EQ(nlohmann::json::parse(out)["id"], "a\"b");
}

TEST(Usage, RemovesUsageFromTheFirstChoiceKeepingEveryOtherByte) {
  std::string out;
  ASSERT_TRUE(removeChoiceUsage(kMoonshotLastChunk, out));
  const std::string_view removed =
      R"(,"usage":{"prompt_tokens":100,"completion_tokens":30,"total_tokens":130,"cached_tokens":64})";
  std::string expected(kMoonshotLastChunk);
  expected.erase(expected.find(removed), removed.size());
  EXPECT_EQ(out, expected);

  out.clear();
  ASSERT_TRUE(removeChoiceUsage(
      R"({"choices":[{"usage":{"total_tokens":1}, "index":0},{"usage":{}}],"usage":null})", out));
  EXPECT_EQ(out, R"({"choices":[{"index":0},{"usage":{}}],"usage":null})");

  out = "kept";
  EXPECT_FALSE(removeChoiceUsage(kOpenAiUsageChunk, out));              // no choices[0]
  EXPECT_FALSE(removeChoiceUsage(kOrdinaryChunk, out));                 // choices[0] has no usage
  EXPECT_FALSE(removeChoiceUsage(R"({"choices":[{"usage":{}})", out));  // malformed
  EXPECT_EQ(out, "kept");
}

TEST(Usage, RemovesEveryUsageMemberOfTheChosenPlaces) {
  std::string out;
  // Top level and choices[0], with duplicates, an escaped key and "usage" last.
  ASSERT_TRUE(removeUsage(
      R"({"usage":{"total_tokens":1},"choices":[{"usage":1,"i":0,"us\u0061ge":{}}],"x":1,"usage":null,"usage":{}})",
      true, out));
  EXPECT_EQ(out, R"({"choices":[{"i":0}],"x":1})");

  out.clear();  // choices[0] only: the top level is kept
  ASSERT_TRUE(removeUsage(R"({"usage":{"total_tokens":1},"choices":[{"usage":{} }]})", false, out));
  EXPECT_EQ(out, R"({"usage":{"total_tokens":1},"choices":[{ }]})");

  out.clear();  // nothing but usage: the braces stay
  ASSERT_TRUE(removeUsage(R"({ "usage":{}, "usage":2 })", true, out));
  EXPECT_EQ(out, R"({  })");

  out = "kept";
  EXPECT_FALSE(removeUsage(R"({"usage":{}})", false, out));  // top level not asked for
  EXPECT_FALSE(removeUsage(R"({"choices":[]})", true, out));
  EXPECT_EQ(out, "kept");
}

TEST(Usage, ReadsAWholeBodyFromItsLastUsageKey) {
  const std::string body =
      R"({"id":"c","choices":[{"message":{"content":"the \"usage\":{\"prompt_tokens\":999} of words"}}],)"
      R"("usage": {"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,)"
      R"("prompt_tokens_details":{"cached_tokens":4}}})";
  std::optional<Usage> u = extractBodyUsage(body);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->promptTokens, 12);
  EXPECT_EQ(u->completionTokens, 5);
  EXPECT_EQ(u->cachedTokens, 4);

  // A content string that ends the body with the key's bytes, escaped, is not a key.
  const std::string trick =
      R"({"usage":{"prompt_tokens":3,"completion_tokens":1},"c":"x\"usage\":{}"})";
  u = extractBodyUsage(trick);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->promptTokens, 3);

  // The key's bytes at the very end of the body, and at its start: no key
  // that can hold a value (the search stops in range at both ends).
  EXPECT_FALSE(extractBodyUsage(R"({"id":"c","usage")"));
  EXPECT_FALSE(extractBodyUsage(R"("usage")"));
  EXPECT_FALSE(extractBodyUsage(R"("usage":{"prompt_tokens":1}})"));
  // Other 'g's after the key (the search's pivot byte) are passed over.
  u = extractBodyUsage(
      R"({"usage":{"prompt_tokens":2,"completion_tokens_details":{"reasoning_tokens":1}},)"
      R"("system_fingerprint":"fp_g","tag":"gg\"usage"})");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->promptTokens, 2);
  EXPECT_EQ(u->reasoningTokens, 1);

  // "usage": null and no usage at all: nothing (via the full scan).
  EXPECT_FALSE(extractBodyUsage(R"({"id":"c","usage":null})"));
  EXPECT_FALSE(extractBodyUsage(R"({"id":"c"})"));
  // An unterminated usage object is not trusted.
  EXPECT_FALSE(extractBodyUsage(R"({"usage":{"prompt_tokens":1)"));
  // Mistyped counts read as 0, as extractUsage() reads them.
  u = extractBodyUsage(R"({"usage":{"prompt_tokens":"many","completion_tokens":2}})");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->promptTokens, 0);
  EXPECT_EQ(u->completionTokens, 2);
}

}  // namespace
}  // namespace relay::sse
