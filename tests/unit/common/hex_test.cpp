#include "relay/common/hex.hpp"

#include <string>

#include <gtest/gtest.h>

#include "relay/common/request_id.hpp"
#include "relay/common/trace_context.hpp"

namespace relay {
namespace {

TEST(Hex, WritesBytesAndWordsMostSignificantFirst) {
  const unsigned char bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(toHexString(bytes, 4), "000fa5ff");
  EXPECT_EQ(toHexString(bytes, 0), "");
  std::string word(16, '?');
  EXPECT_EQ(writeHexWord(word.data(), 0x0123456789abcdefULL), word.data() + 16);
  EXPECT_EQ(word, "0123456789abcdef");
  std::string low(8, '?');
  writeHexWord(low.data(), 0xffffffff0000beefULL, 8);
  EXPECT_EQ(low, "0000beef");
  std::string flags(2, '?');
  writeHexWord(flags.data(), 0x01, 2);
  EXPECT_EQ(flags, "01");
}

bool lowerHex(std::string_view s) {
  return s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

TEST(Hex, IdsHaveTheirShapes) {
  const std::string id = newRequestId();
  ASSERT_EQ(id.size(), 28u);
  EXPECT_EQ(id.substr(0, 4), "req_");
  EXPECT_TRUE(lowerHex(id.substr(4)));
  EXPECT_NE(newRequestId(), id);

  const std::string trace = newTraceId(), span = newSpanId();
  EXPECT_EQ(trace.size(), 32u);
  EXPECT_EQ(span.size(), 16u);
  EXPECT_TRUE(lowerHex(trace) && lowerHex(span));
  TraceContext t;
  t.traceId = trace;
  t.spanId = span;
  t.flags = 1;
  EXPECT_EQ(t.traceparent(), "00-" + trace + "-" + span + "-01");
  t.flags = 0;
  EXPECT_EQ(t.traceparent(), "00-" + trace + "-" + span + "-00");
}

}  // namespace
}  // namespace relay
