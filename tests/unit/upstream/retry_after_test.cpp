#include "relay/upstream/retry_after.hpp"

#include <gtest/gtest.h>

namespace relay::upstream {
namespace {

using namespace std::chrono;

WallTime utc(int y, unsigned mo, unsigned d, int h, int mi, int s, int ms = 0) {
  return WallTime(sys_days(year(y) / month(mo) / day(d))) + hours(h) + minutes(mi) + seconds(s) +
         milliseconds(ms);
}

const WallTime kNow = utc(1994, 11, 6, 8, 49, 0);

TEST(RetryAfter, DeltaSeconds) {
  EXPECT_EQ(parseRetryAfter("120", kNow), Millis(120'000));
  EXPECT_EQ(parseRetryAfter("0", kNow), Millis(0));
  EXPECT_EQ(parseRetryAfter(" 5\t", kNow), Millis(5'000));
  EXPECT_EQ(parseRetryAfter("007", kNow), Millis(7'000));
}

TEST(RetryAfter, FractionalSecondsAreAcceptedAndRoundedUp) {
  EXPECT_EQ(parseRetryAfter("1.5", kNow), Millis(1'500));
  EXPECT_EQ(parseRetryAfter("0.0001", kNow), Millis(1));
  EXPECT_EQ(parseRetryAfter("2.000", kNow), Millis(2'000));
}

TEST(RetryAfter, HugeDeltaSaturates) {
  EXPECT_EQ(parseRetryAfter("99999999999999999999999", kNow), kMaxRetryAfter);
  EXPECT_EQ(parseRetryAfter("2147483648", kNow), kMaxRetryAfter);
  EXPECT_EQ(parseRetryAfter("2147483647", kNow), Millis(2'147'483'647'000LL));
}

TEST(RetryAfter, JunkIsIgnored) {
  for (const char* junk : {"", " ", "-1", "+5", "1e3", "5s", "1.", ".5", "1.2.3", "soon", "0x10"}) {
    EXPECT_EQ(parseRetryAfter(junk, kNow), std::nullopt) << junk;
  }
}

TEST(RetryAfter, ImfFixdate) {
  EXPECT_EQ(parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", kNow), Millis(37'000));
  // Rounded up against a `now` with a fraction of a second.
  EXPECT_EQ(parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", utc(1994, 11, 6, 8, 49, 36, 250)),
            Millis(750));
  // Across a day, month and year boundary.
  EXPECT_EQ(parseRetryAfter("Thu, 01 Jan 2026 00:00:05 GMT", utc(2025, 12, 31, 23, 59, 0)),
            Millis(65'000));
}

TEST(RetryAfter, DateInThePastMeansNoWait) {
  EXPECT_EQ(parseRetryAfter("Sun, 06 Nov 1994 08:48:00 GMT", kNow), Millis(0));
  EXPECT_EQ(parseRetryAfter("Sun, 06 Nov 1994 08:49:00 GMT", kNow), Millis(0));
}

// Found by fuzz_retry_after: "Wed, 31 Dec 2502 23:59:60 GMT" overflowed the
// conversion to WallTime's 64-bit nanoseconds (UBSan: signed integer overflow
// in std::chrono::duration_cast). Dates outside its range saturate instead.
TEST(RetryAfter, DatesBeyondWallTimesRangeSaturate) {
  const WallTime first = ceil<seconds>(WallTime::min());
  const WallTime last = floor<seconds>(WallTime::max());
  EXPECT_EQ(parseHttpDate("Wed, 31 Dec 2502 23:59:60 GMT", kNow), last);
  EXPECT_EQ(parseHttpDate("Fri, 31 Dec 9999 23:59:59 GMT", kNow), last);
  EXPECT_EQ(parseHttpDate("Sat Jan  1 00:00:00 0000", kNow), first);
  EXPECT_EQ(parseHttpDate("Mon, 01 Jan 1600 00:00:00 GMT", kNow), first);
  EXPECT_EQ(parseRetryAfter("Wed, 31 Dec 2502 23:59:60 GMT", kNow), kMaxRetryAfter);
  EXPECT_EQ(parseRetryAfter("Mon, 01 Jan 1600 00:00:00 GMT", kNow), Millis(0));
  // The last whole second WallTime holds is still read exactly.
  EXPECT_EQ(parseHttpDate("Fri, 11 Apr 2262 23:47:16 GMT", kNow), last);
  EXPECT_EQ(parseHttpDate("Fri, 11 Apr 2262 23:47:15 GMT", kNow), last - seconds(1));
}

TEST(RetryAfter, ObsoleteRfc850Form) {
  EXPECT_EQ(parseRetryAfter("Sunday, 06-Nov-94 08:49:37 GMT", kNow), Millis(37'000));
  EXPECT_EQ(parseRetryAfter("Monday, 01-Jan-35 00:00:10 GMT", utc(2034, 12, 31, 23, 59, 50)),
            Millis(20'000));
}

TEST(RetryAfter, TwoDigitYearsMoreThanFiftyYearsAheadAreInThePast) {
  const WallTime now = utc(2030, 6, 1, 0, 0, 0);
  EXPECT_EQ(parseHttpDate("Saturday, 01-Jun-80 00:00:00 GMT", now), utc(2080, 6, 1, 0, 0, 0));
  EXPECT_EQ(parseHttpDate("Monday, 01-Jun-81 00:00:00 GMT", now), utc(1981, 6, 1, 0, 0, 0));
  EXPECT_EQ(parseHttpDate("Saturday, 01-Jun-30 00:00:00 GMT", now), utc(2030, 6, 1, 0, 0, 0));
}

TEST(RetryAfter, ObsoleteAsctimeForm) {
  EXPECT_EQ(parseRetryAfter("Sun Nov  6 08:49:37 1994", kNow), Millis(37'000));
  EXPECT_EQ(parseHttpDate("Wed Nov 16 08:49:37 1994", kNow), utc(1994, 11, 16, 8, 49, 37));
}

TEST(RetryAfter, MalformedDatesAreIgnored) {
  for (const char* bad : {
           "Sun, 31 Feb 1994 08:49:37 GMT",  // no such day
           "Sun, 06 Nov 1994 24:00:00 GMT",  // no such hour
           "Sun, 06 Nov 1994 08:49:37",      // zone missing
           "Sun, 06 Nov 1994 08:49:37 UTC",  // only GMT is allowed
           "Sun, 06 Nov 1994 08:49:37 GMT junk",
           "Sun, 6 Nov 1994 08:49:37 GMT",  // day needs two digits
           "Fun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Now 1994 08:49:37 GMT",
           "Sunday, 06-Nov-1994 08:49:37 GMT",
           "Sun Nov 6 08:49:37 1994",  // asctime pads the day with a space
       }) {
    EXPECT_EQ(parseHttpDate(bad, kNow), std::nullopt) << bad;
    EXPECT_EQ(parseRetryAfter(bad, kNow), std::nullopt) << bad;
  }
}

TEST(RetryAfter, NamesAreCaseInsensitive) {
  EXPECT_EQ(parseRetryAfter("sun, 06 nov 1994 08:49:37 GMT", kNow), Millis(37'000));
}

TEST(RetryAfterMs, MillisecondsMayBeFractional) {
  EXPECT_EQ(parseRetryAfterMs("1500"), Millis(1'500));
  EXPECT_EQ(parseRetryAfterMs("1500.25"), Millis(1'501));
  EXPECT_EQ(parseRetryAfterMs("0.0000000001"), Millis(1));
  EXPECT_EQ(parseRetryAfterMs("10.000"), Millis(10));
  EXPECT_EQ(parseRetryAfterMs("0"), Millis(0));
  EXPECT_EQ(parseRetryAfterMs("-5"), std::nullopt);
  EXPECT_EQ(parseRetryAfterMs("1e3"), std::nullopt);
  EXPECT_EQ(parseRetryAfterMs(""), std::nullopt);
}

TEST(RetryAfterMs, TakesPrecedenceOverRetryAfter) {
  EXPECT_EQ(upstreamRetryDelay("250", "10", kNow), Millis(250));
  EXPECT_EQ(upstreamRetryDelay("250", "Sun, 06 Nov 1994 08:49:37 GMT", kNow), Millis(250));
  // An unreadable retry-after-ms does not hide a good Retry-After.
  EXPECT_EQ(upstreamRetryDelay("soon", "2", kNow), Millis(2'000));
  EXPECT_EQ(upstreamRetryDelay("", "Sun, 06 Nov 1994 08:49:37 GMT", kNow), Millis(37'000));
  EXPECT_EQ(upstreamRetryDelay("", "", kNow), std::nullopt);
  EXPECT_EQ(upstreamRetryDelay("x", "y", kNow), std::nullopt);
}

}  // namespace
}  // namespace relay::upstream
