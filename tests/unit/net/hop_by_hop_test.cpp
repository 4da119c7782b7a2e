// isHopByHopHeader (src/net/session_common.hpp): exactly the fields that
// describe one hop (RFC 9110 §7.6.1, RFC 9113 §8.2.2) — and no other name of
// the same length, since the check goes by length first.
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "session_common.hpp"

namespace relay::net {
namespace {

constexpr std::string_view kHopByHop[] = {
    "connection", "keep-alive", "proxy-connection", "transfer-encoding",
    "te",         "upgrade",    "trailer",          "http2-settings",
};

TEST(HopByHop, EveryHopByHopNameIsOne) {
  for (std::string_view name : kHopByHop)
    EXPECT_TRUE(isHopByHopHeader(name)) << name;
}

TEST(HopByHop, NamesOfTheSameLengthsAreNot) {
  for (std::string_view name : kHopByHop) {
    std::string near(name);
    near.back() = near.back() == 'x' ? 'y' : 'x';  // one byte off
    EXPECT_FALSE(isHopByHopHeader(near)) << near;
    std::string first(name);
    first.front() = 'x';
    EXPECT_FALSE(isHopByHopHeader(first)) << first;
  }
  for (std::string_view name : {"host", "content-length", "content-type", "authorization",
                                "x-request-id", "date", "trailers", "t", "", "upgrade-insecure"})
    EXPECT_FALSE(isHopByHopHeader(name)) << name;
}

TEST(HopByHop, NamesAreComparedAsGivenLowercase) {
  // Callers pass names lowercased (Headers stores them so); a capital is
  // another name.
  EXPECT_FALSE(isHopByHopHeader("Connection"));
  EXPECT_FALSE(isHopByHopHeader("TE"));
}

}  // namespace
}  // namespace relay::net
