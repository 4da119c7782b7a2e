// The rate-limit headers OpenAI clients read, as values with no heap behind
// them: they are produced for every response to an authenticated caller.
//
//   x-ratelimit-limit-{requests,tokens}      bucket capacity (the burst)
//   x-ratelimit-remaining-{requests,tokens}  whole tokens left now (>= 0)
//   x-ratelimit-reset-{requests,tokens}      time until the bucket is full
//                                            again, Go-style ("6m0s", "12ms")
//
// A 429 also carries when to come back: `retry-after` in whole seconds
// (rounded up, at least 1) and `retry-after-ms` (rounded up, at least 1),
// both the true time until the refused request could be admitted. The OpenAI
// SDKs prefer retry-after-ms. `x-should-retry` says whether retrying can help.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string_view>

#include "relay/admission/go_duration.hpp"
#include "relay/common/headers.hpp"

namespace relay::admission {

// The value is formatted straight into `storage` (no copy): numbers from its
// start, durations right-aligned as formatGoDuration writes them.
struct RateLimitHeader {
  std::string_view name;     // static storage
  GoDurationBuffer storage;  // (not zeroed: only [begin, begin + size) is ever read)
  std::uint8_t begin = 0;
  std::uint8_t size = 0;
  std::string_view value() const { return {storage.data() + begin, size}; }
};

class RateLimitHeaders {
 public:
  // In the order limit, remaining, reset; requests before tokens; dimensions
  // without a limit are left out, so an unlimited key gets none.
  std::span<const RateLimitHeader> fields() const { return {items_.data(), count_}; }
  void appendTo(Headers& headers) const;
  // The value of the field `name`, or empty.
  std::string_view get(std::string_view name) const {
    for (const RateLimitHeader& h : fields())
      if (h.name == name) return h.value();
    return {};
  }

  // For the producer (KeyLimiter); at most six fields.
  void addNumber(std::string_view name, std::uint64_t value);
  void addResetDuration(std::string_view name, std::chrono::nanoseconds untilFull);

 private:
  std::array<RateLimitHeader, 6> items_;
  std::size_t count_ = 0;
};

// Whole seconds for Retry-After: rounded up, never below 1.
std::uint64_t retryAfterSeconds(std::chrono::nanoseconds wait);
// Milliseconds for retry-after-ms: rounded up, never below 1.
std::uint64_t retryAfterMillis(std::chrono::nanoseconds wait);

}  // namespace relay::admission
