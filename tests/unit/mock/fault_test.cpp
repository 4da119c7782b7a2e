// The mock's fault SPEC grammar: tests and the demo write these by hand, so a
// typo must be an error that names the item, never a silently ignored fault.
#include "fault.hpp"

#include <gtest/gtest.h>

namespace relay::mock {
namespace {

FaultSpec parseOk(std::string_view text) {
  FaultParseResult r = parseFaultSpec(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.error;
  return r.spec;
}

std::string parseError(std::string_view text) {
  FaultParseResult r = parseFaultSpec(text);
  EXPECT_FALSE(r.ok()) << text;
  return r.error;
}

TEST(FaultSpecTest, EmptyIsNoop) {
  EXPECT_TRUE(parseOk("").isNoop());
  EXPECT_TRUE(parseOk(" ; ;").isNoop());
}

TEST(FaultSpecTest, StatusWithRetryHints) {
  FaultSpec s =
      parseOk("status=429; retry_after=1;retry_after_ms=250;error_type=engine_overloaded_error");
  ASSERT_TRUE(s.status);
  EXPECT_EQ(*s.status, 429);
  EXPECT_EQ(s.retryAfterSeconds, 1u);
  EXPECT_EQ(s.retryAfterMs, 250u);
  EXPECT_EQ(s.errorType, "engine_overloaded_error");
  EXPECT_FALSE(s.isNoop());
}

TEST(FaultSpecTest, ActionsAndModifiers) {
  EXPECT_TRUE(parseOk("hang").hang);
  EXPECT_TRUE(parseOk("reset").reset);
  EXPECT_EQ(parseOk("reset_after=3").resetAfterChunks, 3u);
  EXPECT_EQ(parseOk("reset_after=0").resetAfterChunks, 0u);
  FaultSpec delayed = parseOk("first_byte_delay_ms=500;times=2");
  EXPECT_EQ(delayed.firstByteDelayMs, 500u);
  EXPECT_EQ(delayed.times, 2u);
  EXPECT_FALSE(delayed.isNoop());
}

TEST(FaultSpecTest, TimesAloneChangesNothing) {
  EXPECT_TRUE(parseOk("times=3").isNoop());
}

TEST(FaultSpecTest, RejectsTyposAndBadNumbers) {
  EXPECT_NE(parseError("stauts=503").find("stauts"), std::string::npos);
  parseError("status=200");
  parseError("status=600");
  parseError("status=5o3");
  parseError("status=+503");
  parseError("status=");
  parseError("status");
  parseError("reset_after=-1");
  parseError("first_byte_delay_ms=1.5");
  parseError("times=0");
  parseError("hang=1");
  parseError("error_type=bad type;status=500");
  parseError("status=503;status=500");
  parseError("first_byte_delay_ms=99999999999");
}

TEST(FaultSpecTest, RejectsContradictions) {
  parseError("hang;reset");
  parseError("status=503;reset_after=2");
  parseError("retry_after=1");
  parseError("error_type=server_error");
}

TEST(FaultSpecTest, DescribeIsCanonicalAndRoundTrips) {
  FaultSpec s = parseOk(" times=2 ; retry_after=1; status=503 ");
  EXPECT_EQ(describeFault(s), "status=503;retry_after=1;times=2");
  EXPECT_EQ(describeFault(parseOk(describeFault(s))), describeFault(s));
  EXPECT_EQ(describeFault(parseOk("reset;first_byte_delay_ms=10")), "reset;first_byte_delay_ms=10");
}

}  // namespace
}  // namespace relay::mock
