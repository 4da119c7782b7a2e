// Durations written the way Go's time.Duration.String() writes them, because
// that is what OpenAI's x-ratelimit-reset-* headers carry ("6m0s", "12ms",
// "2m59.56s") and what clients parse.
//
// Go's rules: zero is "0s"; below one second a single unit with a fraction
// ("850µs", "1.5ms", "12ns"); from one second up, hours/minutes/seconds where
// hours and minutes appear only when non-zero but every lower unit is then
// written ("1h0m0s"); fractions drop trailing zeros and a bare '.'; negative
// values get a leading '-'.
//
// Go writes microseconds as "µs" with U+00B5 (MICRO SIGN, bytes C2 B5).
// formatGoDuration keeps that for fidelity, but a header value should stay
// visible ASCII (RFC 9110 §5.5 calls other bytes obs-text), so headers use
// formatResetDuration, which rounds up to whole milliseconds first: the
// result never contains 'µ' or "ns" and never says less than the truth.
#pragma once

#include <array>
#include <chrono>
#include <string>
#include <string_view>

namespace relay::admission {

// Long enough for any int64 nanosecond count ("-2562047h47m16.854775808s").
using GoDurationBuffer = std::array<char, 32>;

// Writes the text at the end of `buf` and returns a view of it (no allocation).
std::string_view formatGoDuration(std::chrono::nanoseconds d, GoDurationBuffer& buf);
std::string formatGoDuration(std::chrono::nanoseconds d);

// `d` rounded up to a whole millisecond (negative values count as zero).
std::chrono::nanoseconds ceilToMillis(std::chrono::nanoseconds d);

// formatGoDuration(ceilToMillis(d)): "0s", "1ms", "12ms", "1.5s", "6m0s".
std::string_view formatResetDuration(std::chrono::nanoseconds d, GoDurationBuffer& buf);

}  // namespace relay::admission
