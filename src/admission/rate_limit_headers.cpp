#include "relay/admission/rate_limit_headers.hpp"

#include <algorithm>
#include <charconv>

namespace relay::admission {

// Both producers run on every response, so they write in place: an
// intermediate buffer plus memcpy measured slower than the formatting itself.
void RateLimitHeaders::addNumber(std::string_view name, std::uint64_t value) {
  if (count_ == items_.size()) return;  // never: two dimensions of three fields
  RateLimitHeader& h = items_[count_++];
  h.name = name;
  // 20 digits at most: always fits in 32 bytes.
  const auto [end, ec] =
      std::to_chars(h.storage.data(), h.storage.data() + h.storage.size(), value);
  h.begin = 0;
  h.size = static_cast<std::uint8_t>(end - h.storage.data());
}

void RateLimitHeaders::addResetDuration(std::string_view name, std::chrono::nanoseconds untilFull) {
  if (count_ == items_.size()) return;
  RateLimitHeader& h = items_[count_++];
  h.name = name;
  const std::string_view text = formatResetDuration(untilFull, h.storage);
  h.begin = static_cast<std::uint8_t>(text.data() - h.storage.data());
  h.size = static_cast<std::uint8_t>(text.size());
}

void RateLimitHeaders::appendTo(Headers& headers) const {
  for (const RateLimitHeader& h : fields())
    headers.add(h.name, h.value());
}

std::uint64_t retryAfterSeconds(std::chrono::nanoseconds wait) {
  if (wait.count() <= 0) return 1;
  return std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::chrono::ceil<std::chrono::seconds>(wait).count()));
}

std::uint64_t retryAfterMillis(std::chrono::nanoseconds wait) {
  if (wait.count() <= 0) return 1;
  return std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::chrono::ceil<std::chrono::milliseconds>(wait).count()));
}

}  // namespace relay::admission
