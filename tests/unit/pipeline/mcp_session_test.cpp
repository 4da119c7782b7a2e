#include "relay/pipeline/mcp_session.hpp"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace relay::pipeline {
namespace {

const std::string kSecret = "a-test-secret-of-at-least-thirty-two-chars";

McpSession sample() {
  return McpSession{3, 1, "planner", "4f1c2a9e-7b3d-4e5f-8a6b-0c1d2e3f4a5b"};
}

TEST(McpSession, RoundTrips) {
  McpSessionCodec codec(kSecret);
  std::optional<std::string> id = codec.encode(sample());
  ASSERT_TRUE(id);
  EXPECT_TRUE(id->starts_with("kr1."));
  std::optional<McpSession> back = codec.decode(*id);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, sample());
}

TEST(McpSession, IsDeterministicAndVisibleAscii) {
  McpSessionCodec codec(kSecret);
  EXPECT_EQ(codec.encode(sample()), codec.encode(sample()));
  const std::string id = *codec.encode(sample());
  for (char c : id)
    EXPECT_TRUE(c > 0x20 && c < 0x7f) << int(c);
}

TEST(McpSession, AnotherProcessWithTheSameSecretAcceptsIt) {
  std::string id = *McpSessionCodec(kSecret).encode(sample());
  EXPECT_EQ(McpSessionCodec(kSecret).decode(id), sample());
  EXPECT_FALSE(McpSessionCodec(kSecret + "x").decode(id));
}

TEST(McpSession, EveryFieldIsCoveredByTheMac) {
  McpSessionCodec codec(kSecret);
  std::string id = *codec.encode(sample());
  // Flipping any character of the encoded part is refused.
  for (std::size_t i = 4; i < id.size(); ++i) {
    std::string bad = id;
    bad[i] = bad[i] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(codec.decode(bad)) << "position " << i;
  }
  EXPECT_FALSE(codec.decode(id.substr(0, id.size() - 1)));
  EXPECT_FALSE(codec.decode(id + "A"));
  EXPECT_FALSE(codec.decode("kr2." + id.substr(4)));
}

TEST(McpSession, DistinctSessionsGiveDistinctIds) {
  McpSessionCodec codec(kSecret);
  std::set<std::string> ids;
  for (std::uint16_t server = 0; server < 3; ++server) {
    for (std::uint16_t instance = 0; instance < 3; ++instance) {
      for (const char* tenant : {"a", "b"}) {
        ids.insert(*codec.encode(McpSession{server, instance, tenant, "same-upstream-id"}));
      }
    }
  }
  EXPECT_EQ(ids.size(), 18u);
}

TEST(McpSession, RefusesGarbage) {
  McpSessionCodec codec(kSecret);
  for (const char* id : {"", "kr1.", "kr1.!!!!", "kr1.AAAA", "4f1c2a9e-7b3d-4e5f-8a6b-0c1d2e3f4a5b",
                         "kr1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}) {
    EXPECT_FALSE(codec.decode(id)) << id;
  }
  EXPECT_FALSE(codec.decode("kr1." + std::string(5000, 'A')));
}

TEST(McpSession, RefusesFieldsOutOfRange) {
  McpSessionCodec codec(kSecret);
  McpSession s = sample();
  s.tenant.clear();
  EXPECT_FALSE(codec.encode(s));
  s = sample();
  s.tenant.assign(256, 't');
  EXPECT_FALSE(codec.encode(s));
  s = sample();
  s.upstreamId.clear();
  EXPECT_FALSE(codec.encode(s));
  s.upstreamId.assign(McpSessionCodec::kMaxUpstreamIdBytes + 1, 'u');
  EXPECT_FALSE(codec.encode(s));
  s.upstreamId.assign(McpSessionCodec::kMaxUpstreamIdBytes, 'u');
  s.tenant.assign(255, 't');
  ASSERT_TRUE(codec.encode(s));
  EXPECT_EQ(codec.decode(*codec.encode(s)), s);
}

TEST(McpSession, GeneratedSecretIsStablePerProcess) {
  std::string a = mcpSessionSecret("");
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(mcpSessionSecret(""), a);
  EXPECT_EQ(mcpSessionSecret(kSecret), kSecret);
}

TEST(Base64Url, MatchesRfc4648Vectors) {
  // RFC 4648 §10, without padding, in the URL-safe alphabet.
  EXPECT_EQ(base64UrlEncode(""), "");
  EXPECT_EQ(base64UrlEncode("f"), "Zg");
  EXPECT_EQ(base64UrlEncode("fo"), "Zm8");
  EXPECT_EQ(base64UrlEncode("foo"), "Zm9v");
  EXPECT_EQ(base64UrlEncode("foob"), "Zm9vYg");
  EXPECT_EQ(base64UrlEncode("fooba"), "Zm9vYmE");
  EXPECT_EQ(base64UrlEncode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64UrlEncode("\xfb\xff"), "-_8");
  for (const char* s : {"", "f", "fo", "foo", "foob", "fooba", "foobar", "\xfb\xff"}) {
    EXPECT_EQ(base64UrlDecode(base64UrlEncode(s)), std::string(s));
  }
  EXPECT_FALSE(base64UrlDecode("Zm9v="));  // padding is not part of the alphabet
  EXPECT_FALSE(base64UrlDecode("Z"));      // no byte count has this length
  EXPECT_FALSE(base64UrlDecode("Zh"));     // non-zero leftover bits: a second spelling of "f"
  EXPECT_FALSE(base64UrlDecode("Zm+v"));   // the standard alphabet's '+'
}


TEST(McpSession, CarriesTheProtocolVersionTheServerAgreedTo) {
  McpSessionCodec codec("a-secret-of-at-least-thirty-two-characters");
  McpSession s{1, 0, "planner", "upstream-session", "2024-11-05"};
  std::optional<std::string> id = codec.encode(s);
  ASSERT_TRUE(id);
  EXPECT_EQ(codec.decode(*id), s);
  s.protocolVersion = std::string(33, 'v');  // beyond 32 bytes
  EXPECT_FALSE(codec.encode(s));
}

}  // namespace
}  // namespace relay::pipeline
