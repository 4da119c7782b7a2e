// parseEndpoint and Endpoint::text.
#include <stdexcept>

#include <gtest/gtest.h>

#include "relay/config/parse.hpp"

namespace relay::config {
namespace {

std::string reasonOf(std::string_view text) {
  try {
    parseEndpoint(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<parsed>";
}

TEST(Endpoint, ParsesHostAndPort) {
  const Endpoint e = parseEndpoint("127.0.0.1:8080");
  EXPECT_EQ(e.host, "127.0.0.1");
  EXPECT_EQ(e.port, 8080);
  EXPECT_EQ(parseEndpoint("localhost:65535").port, 65535);
  EXPECT_EQ(parseEndpoint("gateway.internal:443").host, "gateway.internal");
}

TEST(Endpoint, PortZeroMeansEphemeral) {
  const Endpoint e = parseEndpoint("0.0.0.0:0");
  EXPECT_EQ(e.host, "0.0.0.0");
  EXPECT_EQ(e.port, 0);
}

TEST(Endpoint, ParsesBracketedIpv6) {
  const Endpoint e = parseEndpoint("[::1]:8080");
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 8080);
  EXPECT_EQ(parseEndpoint("[::]:0").host, "::");
  EXPECT_EQ(parseEndpoint("[2001:db8::10]:443").host, "2001:db8::10");
  EXPECT_EQ(parseEndpoint("[::1]:80"), (Endpoint{"::1", 80}));
}

TEST(Endpoint, TextFormatsBack) {
  EXPECT_EQ(parseEndpoint("127.0.0.1:8080").text(), "127.0.0.1:8080");
  EXPECT_EQ(parseEndpoint("[::1]:8080").text(), "[::1]:8080");
  EXPECT_EQ((Endpoint{"::", 0}).text(), "[::]:0");
  EXPECT_EQ((Endpoint{"example.com", 443}).text(), "example.com:443");
}

TEST(Endpoint, RefusesMalformedAddressesWithAReason) {
  EXPECT_EQ(reasonOf(""), "empty address; expected host:port");
  EXPECT_EQ(reasonOf("localhost"), "missing ':port'; expected host:port, e.g. 127.0.0.1:8080");
  EXPECT_EQ(reasonOf("localhost:"), "missing port after ':'");
  EXPECT_EQ(reasonOf(":8080"), "missing host; use 0.0.0.0:PORT or [::]:PORT for every interface");
  EXPECT_EQ(reasonOf("127.0.0.1:65536"), "port must be a number between 0 and 65535");
  EXPECT_EQ(reasonOf("127.0.0.1:-1"), "port must be a number between 0 and 65535");
  EXPECT_EQ(reasonOf("127.0.0.1:80a"), "port must be a number between 0 and 65535");
  EXPECT_EQ(reasonOf("::1:8080"), "an IPv6 host needs brackets, e.g. [::1]:8080");
  EXPECT_EQ(reasonOf("[::1]8080"), "expected ':port' after ']', e.g. [::1]:8080");
  EXPECT_EQ(reasonOf("[::1"), "missing ']' after IPv6 host");
  EXPECT_EQ(reasonOf("[localhost]:80"), "'[...]' must hold an IPv6 address, e.g. [::1]:8080");
  EXPECT_EQ(reasonOf("exa mple:80"), "host must be a name or an IP address");
}

}  // namespace
}  // namespace relay::config
