#include "relay/upstream/retry_after.hpp"

#include <algorithm>
#include <array>
#include <cstdint>

#include "relay/common/headers.hpp"

namespace relay::upstream {
namespace {

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

// "<digits>[.<digits>]" scaled by `unitMs`, rounded up, saturating at
// kMaxRetryAfter. Nothing else is accepted (no sign, no exponent).
std::optional<Millis> parseDecimal(std::string_view s, std::int64_t unitMs) {
  s = trimWhitespace(s);
  const std::size_t dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
  if (whole.empty() || (dot != std::string_view::npos && fraction.empty())) return std::nullopt;
  const std::int64_t limit = kMaxRetryAfter.count();
  std::int64_t ms = 0;
  for (char c : whole) {
    if (!isDigit(c)) return std::nullopt;
    if (ms < limit) ms = ms * 10 + (c - '0') * unitMs;  // cannot overflow: limit * 10 fits
  }
  // The first nine fraction digits are summed exactly; a non-zero digit beyond
  // them can only push the rounded-up result by the one millisecond it adds.
  std::int64_t denominator = 1;
  std::int64_t numerator = 0;
  bool remainder = false;
  for (char c : fraction) {
    if (!isDigit(c)) return std::nullopt;
    if (denominator < 1'000'000'000) {
      denominator *= 10;
      numerator = numerator * 10 + (c - '0');
    } else if (c != '0') {
      remainder = true;
    }
  }
  if (denominator > 1) {
    const std::int64_t scaled = numerator * unitMs;
    ms += scaled / denominator;
    if (scaled % denominator != 0 || remainder) ms += 1;
  }
  return Millis(ms < limit ? ms : limit);
}

constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
constexpr std::array<std::string_view, 7> kShortDays = {"Mon", "Tue", "Wed", "Thu",
                                                        "Fri", "Sat", "Sun"};
constexpr std::array<std::string_view, 7> kLongDays = {
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};

// A tiny cursor over the date text; every read checks what it consumes.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool done() const { return s_.empty(); }
  bool literal(std::string_view lit) {
    if (!s_.starts_with(lit)) return false;
    s_.remove_prefix(lit.size());
    return true;
  }
  // Exactly `n` digits.
  std::optional<int> digits(std::size_t n) {
    if (s_.size() < n) return std::nullopt;
    int v = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (!isDigit(s_[i])) return std::nullopt;
      v = v * 10 + (s_[i] - '0');
    }
    s_.remove_prefix(n);
    return v;
  }
  // One of `names` (case-insensitive); returns its index.
  template <std::size_t N>
  std::optional<int> name(const std::array<std::string_view, N>& names) {
    for (std::size_t i = 0; i < N; ++i) {
      if (s_.size() >= names[i].size() &&
          equalsIgnoreCase(s_.substr(0, names[i].size()), names[i])) {
        s_.remove_prefix(names[i].size());
        return static_cast<int>(i);
      }
    }
    return std::nullopt;
  }
  std::optional<int> month() {
    auto m = name(kMonths);
    return m ? std::optional<int>(*m + 1) : std::nullopt;
  }

 private:
  std::string_view s_;
};

struct Civil {
  int year = 0;
  int month = 0;
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
};

bool timeOfDay(Cursor& c, Civil& t) {
  auto h = c.digits(2);
  if (!h || !c.literal(":")) return false;
  auto m = c.digits(2);
  if (!m || !c.literal(":")) return false;
  auto s = c.digits(2);
  if (!s) return false;
  t.hour = *h;
  t.minute = *m;
  t.second = *s;
  // 60 admits a leap second; it lands on the next minute.
  return t.hour <= 23 && t.minute <= 59 && t.second <= 60;
}

// WallTime counts nanoseconds in 64 bits, about the years 1678 to 2262, while
// an HTTP-date can name any year from 0000 to 9999. The date is therefore
// computed in seconds and saturates to the first or last whole second WallTime
// holds; converting it directly overflowed (undefined behaviour, found by
// fuzz_retry_after). parseRetryAfter then waits 0 or kMaxRetryAfter, as for
// any date that far away.
std::optional<WallTime> toWallTime(const Civil& t) {
  using namespace std::chrono;
  const year_month_day ymd{year(t.year), month(static_cast<unsigned>(t.month)),
                           day(static_cast<unsigned>(t.day))};
  if (!ymd.ok()) return std::nullopt;
  const sys_seconds at = sys_days(ymd) + hours(t.hour) + minutes(t.minute) + seconds(t.second);
  constexpr sys_seconds kFirst = ceil<seconds>(WallTime::min());
  constexpr sys_seconds kLast = floor<seconds>(WallTime::max());
  return WallTime(std::clamp(at, kFirst, kLast));
}

// "06 Nov 1994 08:49:37 GMT" after "Sun, ".
std::optional<Civil> imfFixdate(Cursor c) {
  Civil t;
  auto d = c.digits(2);
  if (!d || !c.literal(" ")) return std::nullopt;
  auto m = c.month();
  if (!m || !c.literal(" ")) return std::nullopt;
  auto y = c.digits(4);
  if (!y || !c.literal(" ") || !timeOfDay(c, t) || !c.literal(" GMT") || !c.done()) {
    return std::nullopt;
  }
  t.day = *d;
  t.month = *m;
  t.year = *y;
  return t;
}

// "06-Nov-94 08:49:37 GMT" after "Sunday, ".
std::optional<Civil> rfc850(Cursor c, int currentYear) {
  Civil t;
  auto d = c.digits(2);
  if (!d || !c.literal("-")) return std::nullopt;
  auto m = c.month();
  if (!m || !c.literal("-")) return std::nullopt;
  auto yy = c.digits(2);
  if (!yy || !c.literal(" ") || !timeOfDay(c, t) || !c.literal(" GMT") || !c.done()) {
    return std::nullopt;
  }
  // RFC 9110 §5.6.7: a year that appears more than 50 years in the future is
  // the most recent past year with the same last two digits.
  int year = currentYear - currentYear % 100 + *yy;
  if (year > currentYear + 50) year -= 100;
  t.day = *d;
  t.month = *m;
  t.year = year;
  return t;
}

// "Nov  6 08:49:37 1994" after "Sun ".
std::optional<Civil> asctime(Cursor c) {
  Civil t;
  auto m = c.month();
  if (!m || !c.literal(" ")) return std::nullopt;
  std::optional<int> d = c.literal(" ") ? c.digits(1) : c.digits(2);
  if (!d || !c.literal(" ") || !timeOfDay(c, t) || !c.literal(" ")) return std::nullopt;
  auto y = c.digits(4);
  if (!y || !c.done()) return std::nullopt;
  t.day = *d;
  t.month = *m;
  t.year = *y;
  return t;
}

}  // namespace

std::optional<WallTime> parseHttpDate(std::string_view text, WallTime now) {
  text = trimWhitespace(text);
  std::optional<Civil> civil;
  Cursor c(text);
  if (Cursor longDay = c; longDay.name(kLongDays) && longDay.literal(", ")) {
    const std::chrono::year_month_day today{std::chrono::floor<std::chrono::days>(now)};
    civil = rfc850(longDay, static_cast<int>(today.year()));
  } else if (c.name(kShortDays)) {
    if (Cursor fix = c; fix.literal(", ")) {
      civil = imfFixdate(fix);
    } else if (c.literal(" ")) {
      civil = asctime(c);
    }
  }
  // The weekday is not checked against the date: it carries no information a
  // delay needs, and a wrong one is a sender bug not worth failing over.
  return civil ? toWallTime(*civil) : std::nullopt;
}

std::optional<Millis> parseRetryAfterMs(std::string_view value) {
  return parseDecimal(value, 1);
}

std::optional<Millis> parseRetryAfter(std::string_view value, WallTime now) {
  if (auto delta = parseDecimal(value, 1000)) return delta;
  auto date = parseHttpDate(value, now);
  if (!date) return std::nullopt;
  if (*date <= now) return Millis(0);
  const Millis wait = std::chrono::ceil<Millis>(*date - now);
  return wait < kMaxRetryAfter ? wait : kMaxRetryAfter;
}

std::optional<Millis> upstreamRetryDelay(std::string_view retryAfterMs, std::string_view retryAfter,
                                         WallTime now) {
  if (!retryAfterMs.empty()) {
    if (auto ms = parseRetryAfterMs(retryAfterMs)) return ms;
  }
  if (!retryAfter.empty()) return parseRetryAfter(retryAfter, now);
  return std::nullopt;
}

}  // namespace relay::upstream
