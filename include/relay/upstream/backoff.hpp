// Exponential backoff with full jitter ("Exponential Backoff and Jitter", AWS
// Architecture Blog, 2015): the wait before retry k (k = 0 for the first retry)
// is uniform in [0, min(max, base * 2^k)]. Full jitter spreads the retries of
// many callers that failed together, which a fixed or "equal jitter" delay
// does not; the cap keeps one slow upstream from parking a request for long.
//
// The random source is passed in as 64 random bits per draw, so callers own
// their generator (one per worker, no shared state) and tests are exact.
#pragma once

#include <cstdint>

#include "relay/upstream/time.hpp"

namespace relay::upstream {

struct BackoffOptions {
  Millis base{100};
  Millis max{8'000};
};

// min(max, base * 2^retry), without overflow for any `retry`.
Millis backoffCeiling(const BackoffOptions& options, unsigned retry);

// Uniform in [0, ceiling] (whole milliseconds) from 64 random bits.
Millis fullJitter(Millis ceiling, std::uint64_t randomBits);

inline Millis backoffDelay(const BackoffOptions& options, unsigned retry,
                           std::uint64_t randomBits) {
  return fullJitter(backoffCeiling(options, retry), randomBits);
}

}  // namespace relay::upstream
