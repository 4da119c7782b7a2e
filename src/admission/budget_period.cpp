#include "relay/admission/budget_period.hpp"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "relay/admission/clock.hpp"

namespace relay::admission {

const SystemClock& SystemClock::instance() {
  static const SystemClock clock([] {
    // Whole seconds, at most a year either way; anything else is no offset.
    const char* text = std::getenv("KIMI_RELAY_CLOCK_OFFSET_S");
    if (text == nullptr) return std::chrono::seconds(0);
    const std::string_view v(text);
    long long s = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), s);
    if (ec != std::errc() || end != v.data() + v.size() || s < -366 * 86400 || s > 366 * 86400)
      return std::chrono::seconds(0);
    return std::chrono::seconds(s);
  }());
  return clock;
}

using std::chrono::days;
using std::chrono::floor;
using std::chrono::seconds;
using std::chrono::sys_days;
using std::chrono::year_month_day;

std::string_view periodName(BudgetPeriod period) {
  switch (period) {
    case BudgetPeriod::kDay:
      return "day";
    case BudgetPeriod::kMonth:
      return "month";
    case BudgetPeriod::kTotal:
      return "total";
  }
  return "total";
}

std::string_view periodAdjective(BudgetPeriod period) {
  switch (period) {
    case BudgetPeriod::kDay:
      return "daily";
    case BudgetPeriod::kMonth:
      return "monthly";
    case BudgetPeriod::kTotal:
      return "total";
  }
  return "total";
}

std::optional<BudgetPeriod> parsePeriod(std::string_view name) {
  if (name == "day") return BudgetPeriod::kDay;
  if (name == "month") return BudgetPeriod::kMonth;
  if (name == "total") return BudgetPeriod::kTotal;
  return std::nullopt;
}

WallTime periodStart(BudgetPeriod period, WallTime now) {
  const sys_days day = floor<days>(now);
  switch (period) {
    case BudgetPeriod::kDay:
      return day;
    case BudgetPeriod::kMonth: {
      const year_month_day ymd(day);
      return sys_days(ymd.year() / ymd.month() / 1);
    }
    case BudgetPeriod::kTotal:
      return WallTime{};
  }
  return WallTime{};
}

std::optional<WallTime> periodEnd(BudgetPeriod period, WallTime start) {
  const sys_days day = floor<days>(start);
  switch (period) {
    case BudgetPeriod::kDay:
      return day + days(1);
    case BudgetPeriod::kMonth: {
      const year_month_day ymd(day);
      // year_month arithmetic carries December into January of the next year.
      const auto next = (ymd.year() / ymd.month()) + std::chrono::months(1);
      return sys_days(next / 1);
    }
    case BudgetPeriod::kTotal:
      return std::nullopt;
  }
  return std::nullopt;
}

std::string formatUtc(WallTime t) {
  const auto secs = floor<seconds>(t);
  const sys_days day = floor<days>(secs);
  const year_month_day ymd(day);
  const std::chrono::hh_mm_ss hms(secs - day);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return buf;
}

std::optional<WallTime> parseUtc(std::string_view text) {
  // 0123456789...
  // YYYY-MM-DDTHH:MM:SSZ
  if (text.size() != 20) return std::nullopt;
  auto number = [&](std::size_t pos, std::size_t len) -> int {
    int v = 0;
    for (std::size_t i = pos; i < pos + len; ++i) {
      if (text[i] < '0' || text[i] > '9') return -1;
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  if (text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' || text[16] != ':' ||
      text[19] != 'Z') {
    return std::nullopt;
  }
  const int y = number(0, 4), mo = number(5, 2), d = number(8, 2);
  const int h = number(11, 2), mi = number(14, 2), s = number(17, 2);
  if (y < 0 || mo < 0 || d < 0 || h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 59) {
    return std::nullopt;
  }
  const year_month_day ymd{std::chrono::year(y), std::chrono::month(static_cast<unsigned>(mo)),
                           std::chrono::day(static_cast<unsigned>(d))};
  if (!ymd.ok()) return std::nullopt;
  return sys_days(ymd) + std::chrono::hours(h) + std::chrono::minutes(mi) + seconds(s);
}

}  // namespace relay::admission
