#include "relay/common/shared_state_stats.hpp"

namespace relay {

std::string_view redisErrorName(RedisErrorKind kind) {
  constexpr std::string_view kNames[] = {"timeout", "connection", "reply", "protocol", "down"};
  static_assert(std::size(kNames) == static_cast<std::size_t>(RedisErrorKind::kCount));
  return kNames[static_cast<std::size_t>(kind)];
}

std::string_view redisFallbackName(RedisFallback kind) {
  constexpr std::string_view kNames[] = {"local", "reject"};
  static_assert(std::size(kNames) == static_cast<std::size_t>(RedisFallback::kCount));
  return kNames[static_cast<std::size_t>(kind)];
}

void SharedStateStats::observe(std::chrono::nanoseconds d) {
  const double s = std::chrono::duration<double>(d).count();
  std::size_t i = 0;
  while (i < kRedisLatencyBounds.size() && s > kRedisLatencyBounds[i])
    ++i;
  latency[i].fetch_add(1, std::memory_order_relaxed);
  latencySumNs.fetch_add(static_cast<std::uint64_t>(d.count()), std::memory_order_relaxed);
}

SharedStateStats& sharedStateStats() {
  static SharedStateStats stats;
  return stats;
}

}  // namespace relay
