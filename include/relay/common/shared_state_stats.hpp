// Process-wide counters of the shared-state store (cluster.redis_url):
// whether each worker's connection is up, call latency, errors by kind and
// the requests decided without it. /metrics exposes them as kimi_relay_redis_*
// (docs/metrics.md) when a cluster is configured. Relaxed atomics, written
// on the worker loops and read at scrape time.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

namespace relay {

enum class RedisErrorKind : std::uint8_t {
  kTimeout,     // no reply within cluster.redis_timeout_ms
  kConnection,  // connect failed or the connection dropped
  kReply,       // Redis answered with an error (READONLY, OOM, BUSY, NOSCRIPT...)
  kProtocol,    // a reply we could not read (the connection is closed)
  kDown,        // not asked: the connection was down or its breaker open
  kCount
};
std::string_view redisErrorName(RedisErrorKind kind);

enum class RedisFallback : std::uint8_t { kLocal, kReject, kCount };
std::string_view redisFallbackName(RedisFallback kind);

// Upper bounds (seconds) of the latency histogram's buckets.
inline constexpr std::array<double, 12> kRedisLatencyBounds = {
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0};

struct SharedStateStats {
  std::atomic<std::int32_t> connections{0};  // workers whose connection is ready
  std::atomic<std::int32_t> workers{0};      // workers that keep one (0: no cluster)
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(RedisErrorKind::kCount)> errors{};
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(RedisFallback::kCount)>
      fallbacks{};
  std::array<std::atomic<std::uint64_t>, kRedisLatencyBounds.size() + 1> latency{};  // last: +Inf
  std::atomic<std::uint64_t> latencySumNs{0};
  std::atomic<std::uint64_t> settlementsQueued{0};   // waiting for Redis to come back (gauge)
  std::atomic<std::uint64_t> settlementsDropped{0};  // lost: the queue was full

  void error(RedisErrorKind kind) {
    errors[static_cast<std::size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
  }
  void fallback(RedisFallback kind) {
    fallbacks[static_cast<std::size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
  }
  void observe(std::chrono::nanoseconds d);
};

SharedStateStats& sharedStateStats();

}  // namespace relay
