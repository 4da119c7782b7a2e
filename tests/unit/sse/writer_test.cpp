#include "relay/sse/writer.hpp"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "relay/sse/parser.hpp"

namespace relay::sse {
namespace {

// What a client's parser makes of `stream`: the data of its first event.
std::string dataSeenByClient(std::string_view stream) {
  Parser parser;
  parser.feed(stream);
  EXPECT_EQ(parser.parse(), ParseStatus::kOk);
  EXPECT_EQ(parser.completeBytes(), stream);  // nothing left incomplete
  EXPECT_EQ(parser.events().size(), 1U);
  return parser.events().empty() ? "" : std::string(parser.events()[0].data);
}

TEST(SseWriter, WritesADataEvent) {
  std::string out;
  appendData(out, R"({"a":1})");
  EXPECT_EQ(out, "data: {\"a\":1}\n\n");
  appendData(out, "");
  EXPECT_EQ(out, "data: {\"a\":1}\n\ndata: \n\n");
}

TEST(SseWriter, SplitsAPayloadWithLineBreaksIntoDataLines) {
  std::string out;
  appendData(out, "one\ntwo\r\nthree\rfour\n");
  EXPECT_EQ(out, "data: one\ndata: two\ndata: three\ndata: four\ndata: \n\n");
  EXPECT_EQ(dataSeenByClient(out), "one\ntwo\nthree\nfour\n");
}

TEST(SseWriter, WritesDoneAndComments) {
  std::string out;
  appendComment(out, "keep-alive");
  appendDone(out);
  EXPECT_EQ(out, ": keep-alive\n\ndata: [DONE]\n\n");
  EXPECT_EQ(kDoneEvent, "data: [DONE]\n\n");
  out.clear();
  appendComment(out, "a\nb");
  EXPECT_EQ(out, ": a\n: b\n\n");
}

TEST(SseWriter, WritesTheErrorEventTheSdksThrowOn) {
  std::string out;
  appendError(out, "upstream \"kimi\" closed\nthe stream");
  EXPECT_EQ(out,
            "data: {\"error\":{\"message\":\"upstream \\\"kimi\\\" closed\\nthe stream\","
            "\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n");
  const auto error = nlohmann::json::parse(dataSeenByClient(out))["error"];
  EXPECT_EQ(error["message"], "upstream \"kimi\" closed\nthe stream");
  EXPECT_EQ(error["type"], "server_error");
  EXPECT_TRUE(error["param"].is_null());
  EXPECT_TRUE(error["code"].is_null());

  out.clear();
  appendError(out, "too slow", "timeout_error", "upstream_timeout");
  const auto coded = nlohmann::json::parse(dataSeenByClient(out))["error"];
  EXPECT_EQ(coded["type"], "timeout_error");
  EXPECT_EQ(coded["code"], "upstream_timeout");
}

}  // namespace
}  // namespace relay::sse
