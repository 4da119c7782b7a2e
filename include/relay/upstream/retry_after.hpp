// How long an upstream asks us to wait: `Retry-After` (RFC 9110 §10.2.3) as
// delta-seconds or an HTTP-date, and the non-standard `retry-after-ms` that
// OpenAI-style APIs send, which takes precedence because it is more precise.
//
// Malformed values are ignored (nullopt), never an error: a broken header from
// an upstream must not fail a request that could simply back off instead.
// Delays round up to whole milliseconds — never retry earlier than asked.
#pragma once

#include <optional>
#include <string_view>

#include "relay/upstream/time.hpp"

namespace relay::upstream {

// A delta beyond this is treated as this, as RFC 9111 §1.2.2 does for caches.
inline constexpr Millis kMaxRetryAfter{2'147'483'648LL * 1000};

// "120" (RFC form), leniently also "1.5" (fractional seconds, as the OpenAI SDK
// accepts), or an HTTP-date in any of the three forms of RFC 9110 §5.6.7. A date
// in the past gives 0. Optional whitespace around the value is allowed.
std::optional<Millis> parseRetryAfter(std::string_view value, WallTime now);

// "1500" or "1500.25" milliseconds (rounded up); negative or junk -> nullopt.
std::optional<Millis> parseRetryAfterMs(std::string_view value);

// The delay the upstream asked for, from the raw header values ("" = absent):
// a valid retry-after-ms wins, else Retry-After, else nullopt.
std::optional<Millis> upstreamRetryDelay(std::string_view retryAfterMs, std::string_view retryAfter,
                                         WallTime now);

// IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", the obsolete RFC 850 form
// "Sunday, 06-Nov-94 08:49:37 GMT" (a two-digit year more than 50 years ahead of
// `now` is read as the previous century) and asctime "Sun Nov  6 08:49:37 1994".
// A date outside WallTime's range (about 1678 to 2262) gives its first or last
// whole second.
std::optional<WallTime> parseHttpDate(std::string_view text, WallTime now);

}  // namespace relay::upstream
