// How long an upstream asks us to wait (upstream/retry_after.hpp): Retry-After
// and retry-after-ms on any bytes, at three different "now"s. Decimal values
// are checked against an exact digit-by-digit reading, dates against the same
// instant written back as an IMF-fixdate, and upstreamRetryDelay against its
// rule (a valid retry-after-ms wins).
//
// Input: a Retry-After value, optionally followed by LF and a retry-after-ms
// value (a header value holds no LF). Seeds: corpus/retry_after/.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "relay/common/headers.hpp"
#include "relay/upstream/retry_after.hpp"

namespace {

using relay::upstream::kMaxRetryAfter;
using relay::upstream::Millis;
using relay::upstream::WallTime;
using namespace std::chrono;

// "<digits>[.<digits>]" (after trimming) as milliseconds, `unitDigits` being
// log10 of the unit in ms (3 for seconds, 0 for ms): rounded up, capped at
// kMaxRetryAfter. Written independently of the parser: exact for any length.
std::optional<std::int64_t> referenceDecimal(std::string_view s, int unitDigits) {
  s = relay::trimWhitespace(s);
  const std::size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  const std::string_view fraction = dot == std::string_view::npos ? "" : s.substr(dot + 1);
  if (whole.empty() || (dot != std::string_view::npos && fraction.empty())) return std::nullopt;
  for (char c : whole)
    if (c < '0' || c > '9') return std::nullopt;
  for (char c : fraction)
    if (c < '0' || c > '9') return std::nullopt;
  const std::int64_t limit = kMaxRetryAfter.count();
  // ms = whole * 10^unitDigits + the first unitDigits fraction digits, + 1 if
  // any later fraction digit is non-zero (the ceiling).
  std::int64_t ms = 0;
  auto push = [&](int digit) { ms = ms >= limit ? limit : ms * 10 + digit; };
  for (char c : whole)
    push(c - '0');
  for (int i = 0; i < unitDigits; ++i)
    push(i < static_cast<int>(fraction.size()) ? fraction[i] - '0' : 0);
  if (fraction.size() > static_cast<std::size_t>(unitDigits) &&
      fraction.substr(unitDigits).find_first_not_of('0') != std::string_view::npos) {
    ms += 1;
  }
  return ms < limit ? ms : limit;
}

std::string imfFixdate(WallTime t) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const sys_seconds at = floor<seconds>(t);  // in seconds: a WallTime near its ends
  const sys_days day = floor<days>(at);      // is less than a day from overflowing
  const year_month_day ymd(day);
  const hh_mm_ss time(at - day);
  char text[64];
  std::snprintf(text, sizeof text, "%s, %02u %s %04d %02d:%02d:%02d GMT",
                kDays[weekday(day).c_encoding()], static_cast<unsigned>(ymd.day()),
                kMonths[static_cast<unsigned>(ymd.month()) - 1], static_cast<int>(ymd.year()),
                static_cast<int>(time.hours().count()), static_cast<int>(time.minutes().count()),
                static_cast<int>(time.seconds().count()));
  return text;
}

void checkRetryAfter(std::string_view value, WallTime now) {
  const std::optional<Millis> parsed = relay::upstream::parseRetryAfter(value, now);
  const std::optional<std::int64_t> decimal = referenceDecimal(value, 3);
  if (decimal) {
    FUZZ_CHECK(parsed && parsed->count() == *decimal, "delta-seconds read wrongly");
    return;
  }
  const std::optional<WallTime> date = relay::upstream::parseHttpDate(value, now);
  FUZZ_CHECK(parsed.has_value() == date.has_value(), "Retry-After is a number or a date");
  if (!date) return;
  FUZZ_CHECK(*parsed >= Millis(0) && *parsed <= kMaxRetryAfter, "a delay out of range");
  if (*date <= now) {
    FUZZ_CHECK(*parsed == Millis(0), "a date in the past means no wait");
  } else if (*date - now < kMaxRetryAfter) {
    FUZZ_CHECK(*parsed >= *date - now && *parsed - (*date - now) < Millis(1),
               "a date's delay is rounded up to the millisecond, no more");
  } else {
    FUZZ_CHECK(*parsed == kMaxRetryAfter, "a date too far ahead waits the longest delay");
  }
  // Written back as an IMF-fixdate, the same instant must read back (unless a
  // leap second of 31 Dec 9999 carried it into a five-digit year).
  FUZZ_CHECK(floor<seconds>(*date) == *date, "an HTTP-date has no fraction of a second");
  if (year_month_day(floor<days>(*date)).year() > year(9999)) return;
  FUZZ_CHECK(
      relay::upstream::parseHttpDate(imfFixdate(*date), now) == date,
      "an HTTP-date must survive being written back as an IMF-fixdate: " + imfFixdate(*date));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t lf = input.find('\n');
  const std::string_view retryAfter = input.substr(0, lf);
  const std::string_view retryAfterMs =
      lf == std::string_view::npos ? std::string_view() : input.substr(lf + 1);

  // The RFC's example date, a recent one, and the eve of a century (where
  // RFC 850's two-digit years change meaning), to the millisecond.
  const WallTime nows[] = {
      sys_days(1994y / November / 6) + 8h + 49min + 37s,
      sys_days(2025y / December / 2) + 3h + 41min + 7s + 250ms,
      sys_days(2069y / December / 31) + 23h + 59min + 59s + 999ms,
  };

  const std::optional<Millis> ms = relay::upstream::parseRetryAfterMs(retryAfterMs);
  const std::optional<std::int64_t> reference = referenceDecimal(retryAfterMs, 0);
  FUZZ_CHECK(ms.has_value() == reference.has_value() && (!ms || ms->count() == *reference),
             "retry-after-ms read wrongly");
  // Both headers are often the same value: check the input both ways.
  FUZZ_CHECK(relay::upstream::parseRetryAfterMs(retryAfter).has_value() ==
                 referenceDecimal(retryAfter, 0).has_value(),
             "retry-after-ms accepts what the reference does");

  for (const WallTime now : nows) {
    checkRetryAfter(retryAfter, now);
    checkRetryAfter(retryAfterMs, now);
    const std::optional<Millis> delay =
        relay::upstream::upstreamRetryDelay(retryAfterMs, retryAfter, now);
    const std::optional<Millis> expected =
        ms ? ms
           : (retryAfter.empty() ? std::nullopt
                                 : relay::upstream::parseRetryAfter(retryAfter, now));
    FUZZ_CHECK(delay == expected, "a valid retry-after-ms wins, else Retry-After");
  }
  return 0;
}
