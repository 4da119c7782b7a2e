// The RESP2 codec (cluster/resp.hpp): commands out, replies in, and the
// bounds a reply from a misbehaving server meets before anything is built.
#include "relay/cluster/resp.hpp"

#include <gtest/gtest.h>

namespace relay::cluster {
namespace {

RespStatus parseAll(std::string_view in, RespValue& v, std::size_t& used,
                    const RespLimits& l = {}) {
  std::string error;
  return parseReply(in, v, used, error, l);
}

TEST(Resp, EncodesCommandsAsArraysOfBulkStrings) {
  std::string out;
  appendCommand(out, {"SET", "k", "a\r\nb"});
  EXPECT_EQ(out, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n");
  appendCommand(out, std::vector<std::string>{"GET", ""});
  EXPECT_EQ(out.substr(30), "*2\r\n$3\r\nGET\r\n$0\r\n\r\n");
}

TEST(Resp, ReadsEveryReplyType) {
  RespValue v;
  std::size_t used = 0;
  ASSERT_EQ(parseAll("+OK\r\n", v, used), RespStatus::kOk);
  EXPECT_EQ(v.type, RespValue::Type::kSimple);
  EXPECT_EQ(v.text, "OK");
  EXPECT_EQ(used, 5u);
  ASSERT_EQ(parseAll("-NOSCRIPT No matching script\r\n", v, used), RespStatus::kOk);
  EXPECT_TRUE(v.isError());
  ASSERT_EQ(parseAll(":-42\r\n", v, used), RespStatus::kOk);
  EXPECT_EQ(v.integer, -42);
  ASSERT_EQ(parseAll("$-1\r\n", v, used), RespStatus::kOk);
  EXPECT_EQ(v.type, RespValue::Type::kNull);
  ASSERT_EQ(parseAll("*3\r\n:1\r\n$5\r\n12345\r\n*1\r\n+x\r\n:9\r\n", v, used), RespStatus::kOk);
  ASSERT_EQ(v.items.size(), 3u);
  EXPECT_EQ(v.items[0].integer, 1);
  EXPECT_EQ(v.items[1].asInteger(), 12345);
  EXPECT_EQ(v.items[2].items[0].text, "x");
  EXPECT_EQ(used, 27u) << "the trailing :9 belongs to the next reply";
}

TEST(Resp, EveryPrefixOfAReplyNeedsMore) {
  const std::string reply = "*2\r\n$5\r\nhello\r\n:7\r\n";
  for (std::size_t n = 0; n < reply.size(); ++n) {
    RespValue v;
    std::size_t used = 0;
    EXPECT_EQ(parseAll(std::string_view(reply).substr(0, n), v, used), RespStatus::kNeedMore) << n;
  }
}

TEST(Resp, RefusesWhatBreaksTheBounds) {
  RespLimits limits;
  limits.maxBulkBytes = 8;
  limits.maxElements = 4;
  limits.maxDepth = 2;
  limits.maxLineBytes = 16;
  RespValue v;
  std::size_t used = 0;
  std::string error;
  EXPECT_EQ(parseReply("$9\r\n", v, used, error, limits), RespStatus::kBad)
      << "announced, not sent";
  EXPECT_NE(error.find("larger than 8"), std::string::npos);
  EXPECT_EQ(parseReply("*5\r\n", v, used, error, limits), RespStatus::kBad);
  EXPECT_EQ(parseReply("*1\r\n*1\r\n*1\r\n:1\r\n", v, used, error, limits), RespStatus::kBad);
  EXPECT_EQ(parseReply("+" + std::string(20, 'a'), v, used, error, limits), RespStatus::kBad)
      << "a line with no end in sight";
  EXPECT_EQ(parseReply("$2\r\nabXY", v, used, error, limits), RespStatus::kBad);
  EXPECT_EQ(parseReply("?\r\n", v, used, error, limits), RespStatus::kBad);
  EXPECT_EQ(parseReply(":12a\r\n", v, used, error, limits), RespStatus::kBad);
  EXPECT_EQ(parseReply("*-2\r\n", v, used, error, limits), RespStatus::kBad);
  // Within the bounds: exactly at them.
  EXPECT_EQ(parseReply("$8\r\n12345678\r\n", v, used, error, limits), RespStatus::kOk);
  EXPECT_EQ(parseReply("*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n", v, used, error, limits), RespStatus::kOk);
}

}  // namespace
}  // namespace relay::cluster
