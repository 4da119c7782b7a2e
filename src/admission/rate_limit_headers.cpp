#include "relay/admission/rate_limit_headers.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

namespace relay::admission {

void RateLimitHeaders::add(std::string_view name, std::string_view value) {
  if (count_ == items_.size()) return;  // never happens: two dimensions of three fields
  RateLimitHeader& h = items_[count_++];
  h.name = name;
  const std::size_t n = std::min(value.size(), h.storage.size());
  std::memcpy(h.storage.data(), value.data(), n);
  h.size = static_cast<std::uint8_t>(n);
}

void RateLimitHeaders::addNumber(std::string_view name, std::uint64_t value) {
  std::array<char, 24> digits;
  const auto [end, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), value);
  add(name, std::string_view(digits.data(), static_cast<std::size_t>(end - digits.data())));
}

void RateLimitHeaders::appendTo(Headers& headers) const {
  for (const RateLimitHeader& h : fields()) headers.add(h.name, h.value());
}

std::uint64_t retryAfterSeconds(std::chrono::nanoseconds wait) {
  if (wait.count() <= 0) return 1;
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(
                                        std::chrono::ceil<std::chrono::seconds>(wait).count()));
}

std::uint64_t retryAfterMillis(std::chrono::nanoseconds wait) {
  if (wait.count() <= 0) return 1;
  return std::max<std::uint64_t>(
      1, static_cast<std::uint64_t>(std::chrono::ceil<std::chrono::milliseconds>(wait).count()));
}

}  // namespace relay::admission
