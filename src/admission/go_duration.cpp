#include "relay/admission/go_duration.hpp"

#include <cstdint>

namespace relay::admission {
namespace {

constexpr std::uint64_t kMicro = 1'000;
constexpr std::uint64_t kMilli = 1'000'000;
constexpr std::uint64_t kSecond = 1'000'000'000;

// Text is built right to left, from the unit towards the sign, so each writer
// takes the current start of the text and returns the new one.
char* prependUnsigned(char* start, std::uint64_t v) {
  do {
    *--start = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  return start;
}

// Consumes the `digits` lowest decimal digits of `v` as a fraction: writes
// ".ddd" without trailing zeros, or nothing at all when they are all zero.
char* prependFraction(char* start, std::uint64_t& v, int digits) {
  bool significant = false;
  for (int i = 0; i < digits; ++i) {
    const auto digit = static_cast<unsigned>(v % 10);
    v /= 10;
    significant = significant || digit != 0;
    if (significant) *--start = static_cast<char>('0' + digit);
  }
  if (significant) *--start = '.';
  return start;
}

}  // namespace

std::string_view formatGoDuration(std::chrono::nanoseconds d, GoDurationBuffer& buf) {
  char* const end = buf.data() + buf.size();
  char* p = end;
  const std::int64_t raw = d.count();
  const bool negative = raw < 0;
  // Unsigned negation is defined for INT64_MIN too.
  std::uint64_t u =
      negative ? 0 - static_cast<std::uint64_t>(raw) : static_cast<std::uint64_t>(raw);

  *--p = 's';
  if (u == 0) {
    *--p = '0';
    return {p, static_cast<std::size_t>(end - p)};
  }
  if (u < kSecond) {
    int fractionDigits = 0;
    if (u < kMicro) {
      *--p = 'n';
    } else if (u < kMilli) {
      *--p = '\xB5';  // U+00B5 MICRO SIGN in UTF-8 (C2 B5), as Go writes it
      *--p = '\xC2';
      fractionDigits = 3;
    } else {
      *--p = 'm';
      fractionDigits = 6;
    }
    p = prependFraction(p, u, fractionDigits);
    p = prependUnsigned(p, u);
  } else {
    p = prependFraction(p, u, 9);  // u is now whole seconds
    p = prependUnsigned(p, u % 60);
    u /= 60;  // whole minutes
    if (u > 0) {
      *--p = 'm';
      p = prependUnsigned(p, u % 60);
      u /= 60;  // whole hours; Go stops here since days vary in length
      if (u > 0) {
        *--p = 'h';
        p = prependUnsigned(p, u);
      }
    }
  }
  if (negative) *--p = '-';
  return {p, static_cast<std::size_t>(end - p)};
}

std::string formatGoDuration(std::chrono::nanoseconds d) {
  GoDurationBuffer buf;
  return std::string(formatGoDuration(d, buf));
}

std::chrono::nanoseconds ceilToMillis(std::chrono::nanoseconds d) {
  if (d.count() <= 0) return std::chrono::nanoseconds(0);
  // Rounding up could overflow only within 1 ms of the largest duration.
  if (d.count() > INT64_MAX - static_cast<std::int64_t>(kMilli)) return d;
  return std::chrono::ceil<std::chrono::milliseconds>(d);
}

std::string_view formatResetDuration(std::chrono::nanoseconds d, GoDurationBuffer& buf) {
  return formatGoDuration(ceilToMillis(d), buf);
}

}  // namespace relay::admission
