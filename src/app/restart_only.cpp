#include "restart_only.hpp"

#include <algorithm>
#include <array>

namespace relay::app {
namespace {

std::vector<config::Endpoint> tlsAddresses(const config::Config& c) {
  std::vector<config::Endpoint> out;
  for (const auto& tl : c.server.tlsListen)
    out.push_back(tl.address);
  return out;
}

bool sameAddresses(const std::vector<config::Endpoint>& a, const std::vector<config::Endpoint>& b) {
  return a.size() == b.size() && std::is_permutation(a.begin(), a.end(), b.begin());
}

// One entry per key; a lambda without captures is the predicate.
#define RELAY_SERVER_KEY(name, field)                                      \
  RestartOnlySetting {                                                     \
    "server." name, [](const config::Config& a, const config::Config& b) { \
      return a.server.field != b.server.field;                             \
    }                                                                      \
  }

constexpr std::array kSettings{
    // The addresses, in any order: listeners are bound by address.
    RestartOnlySetting{"server.listen",
                       [](const config::Config& a, const config::Config& b) {
                         return !sameAddresses(a.server.listen, b.server.listen);
                       }},
    // Certificates of a listener that stays are reloaded; a new or removed
    // address is not.
    RestartOnlySetting{"server.tls_listen",
                       [](const config::Config& a, const config::Config& b) {
                         return !sameAddresses(tlsAddresses(a), tlsAddresses(b));
                       }},
    RELAY_SERVER_KEY("http2.max_concurrent_streams", http2.maxConcurrentStreams),
    RELAY_SERVER_KEY("http2.initial_window_bytes", http2.initialWindowBytes),
    RELAY_SERVER_KEY("workers", workers),
    RELAY_SERVER_KEY("max_request_bytes", maxRequestBytes),
    RELAY_SERVER_KEY("max_header_bytes", maxHeaderBytes),
    RELAY_SERVER_KEY("max_connection_body_bytes", maxConnectionBodyBytes),
    RELAY_SERVER_KEY("max_connections", maxConnections),
    RELAY_SERVER_KEY("max_connections_per_ip", maxConnectionsPerIp),
    RELAY_SERVER_KEY("header_timeout_ms", headerTimeoutMs),
    RELAY_SERVER_KEY("body_timeout_ms", bodyTimeoutMs),
    RELAY_SERVER_KEY("idle_timeout_ms", idleTimeoutMs),
    RELAY_SERVER_KEY("busy_poll_us", busyPollUs),
    RELAY_SERVER_KEY("memory_release_ms", memoryReleaseMs),
    RELAY_SERVER_KEY("send_buffer_bytes", sendBufferBytes),
    RestartOnlySetting{"admin.listen",
                       [](const config::Config& a, const config::Config& b) {
                         return a.admin.listen != b.admin.listen;
                       }},
    RestartOnlySetting{"cluster.redis_url",
                       [](const config::Config& a, const config::Config& b) {
                         // Cluster's own comparison, on the URL alone.
                         config::Cluster x = a.cluster;
                         x.redisTimeoutMs = b.cluster.redisTimeoutMs;
                         x.onRedisFailure = b.cluster.onRedisFailure;
                         return !(x == b.cluster);
                       }},
    RestartOnlySetting{"cluster.redis_timeout_ms",
                       [](const config::Config& a, const config::Config& b) {
                         return a.cluster.redisTimeoutMs != b.cluster.redisTimeoutMs;
                       }},
    RestartOnlySetting{"cluster.on_redis_failure",
                       [](const config::Config& a, const config::Config& b) {
                         return a.cluster.onRedisFailure != b.cluster.onRedisFailure;
                       }},
    RestartOnlySetting{"log.access_log",
                       [](const config::Config& a, const config::Config& b) {
                         return a.log.accessLog != b.log.accessLog;
                       }},
    RestartOnlySetting{
        "state_dir",
        [](const config::Config& a, const config::Config& b) { return a.stateDir != b.stateDir; }},
};

#undef RELAY_SERVER_KEY

}  // namespace

std::span<const RestartOnlySetting> restartOnlySettings() {
  return kSettings;
}

std::vector<std::string_view> restartOnlyChanges(const config::Config& was,
                                                 const config::Config& now) {
  std::vector<std::string_view> keys;
  for (const RestartOnlySetting& s : kSettings)
    if (s.changed(was, now)) keys.push_back(s.key);
  return keys;
}

std::string restartOnlyWarning(const std::vector<std::string_view>& keys) {
  if (keys.empty()) return {};
  std::string line = "reload: ";
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (i > 0) line += ", ";
    line += keys[i];
  }
  line += keys.size() == 1 ? " changes" : " change";
  line += " only on restart; the running values stay";
  return line;
}

}  // namespace relay::app
