// Differential test: the scanner must accept exactly what nlohmann/json (a
// strict RFC 8259 parser with UTF-8 and surrogate checks) accepts, over
// thousands of deterministic random mutations of realistic documents.
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "relay/common/json_scan.hpp"

namespace relay {
namespace {

const char* const kSeeds[] = {
    R"({"model":"kimi-k2","messages":[{"role":"user","content":"Hi \u00e9 \ud83d\ude00"}],"stream":true,"stream_options":{"include_usage":false},"max_tokens":-0,"t":1.5e-3})",
    R"([1,-2.5,3e10,true,false,null,"x\"y\\z\/\b\f\n\r\t",{},[],{"a":{"b":[{}]}}])",
    "{\"k\":\"caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80\",\"n\":0.0}",
};

// Bytes a mutation may insert: JSON syntax, digits, escapes and UTF-8 pieces
// (no 0xEF: nlohmann skips a leading byte order mark, the scanner refuses it).
const char kAlphabet[] =
    "{}[]:,\"\\/ "
    "\t\n\r0123456789.-+eEtrufalsn\x01\x1F\x7F\x80\xBF\xC3\xA9\xED\xA0\xF0\x9F\xF4\x90uDdCc";

enum class Verdict { kAccepted, kRefused, kUnknown };

// nlohmann's verdict on the grammar. It also stops at a number too large for a
// double ("1e999"), which RFC 8259 leaves to each implementation's range, and
// then says nothing about the rest of the text: those inputs are skipped.
Verdict oracle(const std::string& text) {
  try {
    auto parsed = nlohmann::json::parse(text);
    (void)parsed;
    return Verdict::kAccepted;
  } catch (const nlohmann::json::out_of_range&) {
    return Verdict::kUnknown;
  } catch (const nlohmann::json::parse_error&) {
    return Verdict::kRefused;
  }
}

TEST(JsonScanOracle, AcceptsExactlyWhatNlohmannAccepts) {
  std::mt19937 random(20240601);
  std::size_t accepted = 0;
  std::size_t refused = 0;
  for (const char* seed : kSeeds) {
    ASSERT_TRUE(nlohmann::json::accept(seed));
    for (int round = 0; round < 4000; ++round) {
      std::string text = seed;
      const int edits = 1 + static_cast<int>(random() % 3);
      for (int e = 0; e < edits && !text.empty(); ++e) {
        const std::size_t at = random() % text.size();
        const char byte = kAlphabet[random() % (sizeof kAlphabet - 1)];
        switch (random() % 3) {
          case 0:
            text[at] = byte;
            break;
          case 1:
            text.insert(at, 1, byte);
            break;
          default:
            text.erase(at, 1);
            break;
        }
      }
      const Verdict verdict = oracle(text);
      if (verdict == Verdict::kUnknown) continue;
      const auto error = validateJson(text);
      ASSERT_EQ(!error.has_value(), verdict == Verdict::kAccepted)
          << "input: " << text << "\nscanner: " << (error ? error->describe() : "accepted");
      if (error) {
        ASSERT_LE(error->offset, text.size());
        ++refused;
      } else {
        ++accepted;
      }
    }
  }
  // Both outcomes must be well represented for the comparison to mean anything.
  EXPECT_GT(accepted, 1000U);
  EXPECT_GT(refused, 1000U);
}

TEST(JsonScanOracle, TopLevelMembersMatchNlohmann) {
  const std::string text = kSeeds[0];
  std::vector<JsonMember> members;
  ASSERT_FALSE(scanObject(text, members));
  const auto parsed = nlohmann::json::parse(text);
  ASSERT_EQ(members.size(), parsed.size());
  for (const JsonMember& member : members) {
    const std::string key(member.rawKey);
    ASSERT_TRUE(parsed.contains(key)) << key;
    EXPECT_EQ(nlohmann::json::parse(member.value.span.in(text)), parsed[key]) << key;
  }
}

TEST(JsonScanOracle, UnescapesLikeNlohmann) {
  for (std::string_view literal : {R"("Hi \u00e9 \ud83d\ude00")", R"("\"\\\/\b\f\n\r\t")",
                                   R"("\u0001\u001f\u20AC\uFFFF")", "\"caf\xC3\xA9 \\u4e2d\""}) {
    std::string decoded;
    unescapeString(literal, decoded);
    EXPECT_EQ(decoded, nlohmann::json::parse(literal).get<std::string>()) << literal;
  }
}

}  // namespace
}  // namespace relay
