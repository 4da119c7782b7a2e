// Process-wide counters of the bounds the gateway enforces (DESIGN.md
// "Bounds"): every limit that refuses, cuts or drops something counts here,
// wherever it sits (net, upstream, telemetry), and /metrics exposes them as
// kimi_relay_limit_hits_total{limit}. Relaxed atomics: these move only when a
// peer hits a ceiling, never on the common path.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace relay {

enum class Limit : std::uint8_t {
  kMaxHeaderBytes,          // 431, or the HTTP/2 stream reset
  kMaxRequestBytes,         // 413
  kMaxConnectionBodyBytes,  // an HTTP/2 upload waited for the connection's body budget
  kHeaderTimeout,           // 408 / closed: the request head did not arrive in time
  kBodyTimeout,             // 408: the body did not arrive in time
  kIdleTimeout,             // a keep-alive connection closed for idleness
  kWriteStall,              // a caller that took no bytes for idle_timeout_ms was cut
  kMaxConnections,          // a connection closed at accept: global cap
  kMaxConnectionsPerIp,     // a connection closed at accept: per-address cap
  kHttp2Flood,              // GOAWAY ENHANCE_YOUR_CALM (control-frame or reset flood)
  kHttp2Protocol,           // GOAWAY PROTOCOL_ERROR (malformed frames)
  kUpstreamResponseBytes,   // 502: an upstream body over max_response_bytes
  kSseEventBytes,           // an upstream SSE event over the cap: error event
  kAccessLogDropped,        // access-log lines dropped because the writer fell behind
  kEventSubscribers,        // an event-stream subscriber refused (cap per key)
  kEventsDropped,           // events a slow event-stream subscriber lost
  kCount
};

// The label value, e.g. "max_header_bytes".
std::string_view limitName(Limit limit);

void countLimit(Limit limit, std::uint64_t n = 1);
std::uint64_t limitCount(Limit limit);

// Client connections open on every listener (a gauge).
std::atomic<std::int64_t>& openClientConnections();

}  // namespace relay
