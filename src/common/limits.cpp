#include "relay/common/limits.hpp"

#include <array>

namespace relay {
namespace {

constexpr std::string_view kNames[] = {
    "max_header_bytes",     "max_request_bytes",     "max_connection_body_bytes",
    "header_timeout",       "body_timeout",          "idle_timeout",
    "write_stall",          "max_connections",       "max_connections_per_ip",
    "http2_flood",          "http2_protocol_error",  "upstream_max_response_bytes",
    "sse_event_bytes",      "access_log_dropped",    "event_subscribers",
    "events_dropped",
};
static_assert(std::size(kNames) == static_cast<std::size_t>(Limit::kCount));

std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Limit::kCount)> gCounts{};
std::atomic<std::int64_t> gOpenConnections{0};

}  // namespace

std::string_view limitName(Limit limit) {
  return kNames[static_cast<std::size_t>(limit)];
}

void countLimit(Limit limit, std::uint64_t n) {
  gCounts[static_cast<std::size_t>(limit)].fetch_add(n, std::memory_order_relaxed);
}

std::uint64_t limitCount(Limit limit) {
  return gCounts[static_cast<std::size_t>(limit)].load(std::memory_order_relaxed);
}

std::atomic<std::int64_t>& openClientConnections() {
  return gOpenConnections;
}

}  // namespace relay
