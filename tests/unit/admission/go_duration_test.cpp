// Reset headers must read exactly as Go's time.Duration.String() writes them.
#include "relay/admission/go_duration.hpp"

#include <chrono>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace relay::admission {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::nanoseconds;
using std::chrono::seconds;

struct Case {
  std::int64_t ns;
  const char* text;
};

// Values and texts as Go 1.x prints them.
constexpr Case kGoCases[] = {
    {0, "0s"},
    {1, "1ns"},
    {999, "999ns"},
    {1'000, "1\xC2\xB5s"},
    {1'100, "1.1\xC2\xB5s"},
    {850'000, "850\xC2\xB5s"},
    {999'999, "999.999\xC2\xB5s"},
    {1'000'000, "1ms"},
    {2'200'000, "2.2ms"},
    {12'000'000, "12ms"},
    {12'345'678, "12.345678ms"},
    {999'999'999, "999.999999ms"},
    {1'000'000'000, "1s"},
    {1'500'000'000, "1.5s"},
    {3'300'000'000, "3.3s"},
    {59'999'999'999, "59.999999999s"},
    {60'000'000'000, "1m0s"},
    {245'000'000'000, "4m5s"},
    {245'001'000'000, "4m5.001s"},
    {360'000'000'000, "6m0s"},
    {179'560'000'000, "2m59.56s"},
    {480'000'000'001, "8m0.000000001s"},
    {3'600'000'000'000, "1h0m0s"},
    {3'601'000'000'000, "1h0m1s"},
    {18'367'001'000'000, "5h6m7.001s"},
    {90'000'000'000'000, "25h0m0s"},
    {-1, "-1ns"},
    {-1'500'000'000, "-1.5s"},
    {-360'000'000'000, "-6m0s"},
    {std::numeric_limits<std::int64_t>::max(), "2562047h47m16.854775807s"},
    {std::numeric_limits<std::int64_t>::min(), "-2562047h47m16.854775808s"},
};

TEST(GoDuration, MatchesGoForEveryUnitAndEdge) {
  for (const Case& c : kGoCases) {
    EXPECT_EQ(formatGoDuration(nanoseconds(c.ns)), c.text) << c.ns << " ns";
  }
}

TEST(GoDuration, BufferFormWritesTheSameWithoutAllocating) {
  GoDurationBuffer buf;
  for (const Case& c : kGoCases) {
    EXPECT_EQ(formatGoDuration(nanoseconds(c.ns), buf), c.text);
  }
}

TEST(GoDuration, ChronoUnitsConvert) {
  EXPECT_EQ(formatGoDuration(minutes(6)), "6m0s");
  EXPECT_EQ(formatGoDuration(hours(1)), "1h0m0s");
  EXPECT_EQ(formatGoDuration(milliseconds(1500)), "1.5s");
  EXPECT_EQ(formatGoDuration(microseconds(850)), "850\xC2\xB5s");
}

TEST(GoDuration, ResetHeadersRoundUpToWholeMillisecondsAndStayAscii) {
  GoDurationBuffer buf;
  EXPECT_EQ(formatResetDuration(nanoseconds(0), buf), "0s");
  EXPECT_EQ(formatResetDuration(nanoseconds(-5), buf), "0s");
  EXPECT_EQ(formatResetDuration(nanoseconds(1), buf), "1ms");
  EXPECT_EQ(formatResetDuration(microseconds(850), buf), "1ms");
  EXPECT_EQ(formatResetDuration(microseconds(11'001), buf), "12ms");
  EXPECT_EQ(formatResetDuration(milliseconds(12), buf), "12ms");
  EXPECT_EQ(formatResetDuration(nanoseconds(1'499'000'001), buf), "1.5s");
  EXPECT_EQ(formatResetDuration(minutes(6), buf), "6m0s");
  EXPECT_EQ(formatResetDuration(nanoseconds(179'559'000'001), buf), "2m59.56s");
  for (std::int64_t ns = 1; ns < 5'000'000'000; ns = ns * 3 + 7) {
    for (char ch : formatResetDuration(nanoseconds(ns), buf)) {
      EXPECT_TRUE(ch > 0x20 && ch < 0x7f) << ns;
    }
  }
}

TEST(GoDuration, CeilToMillisNeverUnderstates) {
  EXPECT_EQ(ceilToMillis(nanoseconds(0)), nanoseconds(0));
  EXPECT_EQ(ceilToMillis(nanoseconds(1)), milliseconds(1));
  EXPECT_EQ(ceilToMillis(milliseconds(7)), milliseconds(7));
  EXPECT_EQ(ceilToMillis(nanoseconds(7'000'001)), milliseconds(8));
  const nanoseconds huge(std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(ceilToMillis(huge), huge);  // no overflow at the top of the range
}

}  // namespace
}  // namespace relay::admission
