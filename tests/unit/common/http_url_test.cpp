// The one URL parser (http_url.hpp): what it accepts and how it refuses.
#include "relay/common/http_url.hpp"

#include <gtest/gtest.h>

namespace relay {
namespace {

TEST(HttpUrl, SplitsSchemeHostPortAndPath) {
  HttpUrlParse p = parseHttpUrl("HTTPS://API.Example.com:8443/v1/");
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_TRUE(p.url.https);
  EXPECT_EQ(p.url.host, "api.example.com");
  EXPECT_EQ(p.url.authority, "api.example.com:8443");
  EXPECT_EQ(p.url.port, "8443");
  EXPECT_TRUE(p.url.hasPort);
  EXPECT_EQ(p.url.path, "/v1/");

  p = parseHttpUrl("http://[::1]:9090");
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_FALSE(p.url.https);
  EXPECT_EQ(p.url.host, "::1");
  EXPECT_EQ(p.url.authority, "[::1]:9090");
  EXPECT_EQ(p.url.path, "");

  p = parseHttpUrl("https://h");
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_FALSE(p.url.hasPort);
  EXPECT_EQ(p.url.port, "");
}

TEST(HttpUrl, RefusesWhatABaseUrlMustNotHave) {
  EXPECT_EQ(parseHttpUrl("ftp://h/v1").error, "must be a URL starting with https:// or http://");
  EXPECT_EQ(parseHttpUrl("x/mcp").error, "must be a URL starting with https:// or http://");
  EXPECT_EQ(parseHttpUrl("https://h/v1?x=1").error,
            "must not contain a query ('?') or a fragment ('#')");
  EXPECT_EQ(parseHttpUrl("https://h/v1#top").error,
            "must not contain a query ('?') or a fragment ('#')");
  EXPECT_EQ(parseHttpUrl("https://user:secret@h/v1").error,
            "must not contain credentials (user:password@); put the secret in api_key");
  EXPECT_EQ(parseHttpUrl("https:///v1").error, "has no host");
  EXPECT_EQ(parseHttpUrl("https://h/a b").error, "must not contain spaces or control characters");
  // The text itself is never quoted: it may hold a secret.
  EXPECT_EQ(parseHttpUrl("https://user:sk-123@h/v1").error.find("sk-123"), std::string::npos);
}

}  // namespace
}  // namespace relay
