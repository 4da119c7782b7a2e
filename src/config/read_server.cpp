// server, admin, log, timeouts, retry and currency sections.
#include <algorithm>
#include <thread>

#include "relay/common/cpu.hpp"
#include "sections.hpp"

namespace relay::config::detail {

namespace {

constexpr std::uint32_t kMaxHttp2Window = 2147483647;  // RFC 9113 6.9.1
constexpr unsigned kMaxWorkers = 1024;
constexpr std::uint32_t kMaxAttempts = 100;
// A request line plus Host needs some room; beyond 16 MiB a head is an attack.
constexpr std::uint32_t kMinHeaderBytes = 1024;
constexpr std::uint32_t kMaxHeaderBytes = 16u << 20;
constexpr std::uint32_t kMaxConnections = 10'000'000;
// A worker that polls longer than a millisecond before it sleeps gains no
// latency (a wake-up costs tens of microseconds) and only burns its core.
constexpr std::uint32_t kMaxBusyPollUs = 1000;
constexpr std::uint32_t kMinSendBufferBytes = 4096;
constexpr std::uint32_t kMaxSendBufferBytes = 64u << 20;
// A worker's memory tick: under a tenth of a second the tick's own timer and
// collection are most of what it measures; past an hour, memory a burst left
// stays for hours.
constexpr std::uint32_t kMinMemoryReleaseMs = 100;
constexpr std::uint32_t kMaxMemoryReleaseMs = 3'600'000;

// Two listeners on one fixed port would fail at bind time, far from the line.
void refuseDuplicate(std::vector<std::pair<Endpoint, YAML::Mark>>& seen, const Endpoint& e,
                     const Value& at) {
  if (e.port == 0) return;  // each asks the kernel for its own port
  for (const auto& [other, mark] : seen) {
    if (other.host == e.host && other.port == e.port) {
      at.fail("address " + at.echo() + " is listed twice (first at line " +
              std::to_string(mark.line + 1) + ")");
    }
  }
  seen.emplace_back(e, at.mark());
}

bool isRetryCondition(const std::string& s) {
  if (s == "connect_error" || s == "timeout") return true;
  return s.size() == 3 && s[0] >= '1' && s[0] <= '5' &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// listen and tls_listen: no address twice, across both lists.
void readListeners(const MapView& m, Server& s) {
  std::vector<std::pair<Endpoint, YAML::Mark>> seen;
  m.with("listen", [&](const Value& x) {
    // One address may be written without the list brackets.
    std::vector<Value> items = x.isList() || x.isMap() || x.isNull() ? x.list() : std::vector{x};
    for (const Value& item : items) {
      s.listen.push_back(readEndpoint(item));
      refuseDuplicate(seen, s.listen.back(), item);
    }
  });
  m.with("tls_listen", [&](const Value& x) {
    for (const Value& item : x.list()) {
      const MapView t = item.map({"address", "cert", "key"});
      TlsListener l;
      const Value address = t.require("address");
      l.address = readEndpoint(address);
      refuseDuplicate(seen, l.address, address);
      l.certFile = readNonEmpty(t.require("cert"));
      l.keyFile = readNonEmpty(t.require("key"));
      s.tlsListen.push_back(std::move(l));
    }
  });
}

void readHttp2(const Value& x, Http2Settings& http2) {
  const MapView h = x.map({"max_concurrent_streams", "initial_window_bytes"});
  h.with("max_concurrent_streams", [&](const Value& y) {
    http2.maxConcurrentStreams = y.unsignedInt<std::uint32_t>(1, kMaxHttp2Window);
  });
  h.with("initial_window_bytes", [&](const Value& y) {
    http2.initialWindowBytes = y.unsignedInt<std::uint32_t>(1, kMaxHttp2Window);
  });
}

}  // namespace

Server readServer(const Value& v) {
  Server s;
  const MapView m =
      v.map({"listen", "tls_listen", "http2", "workers", "max_request_bytes", "max_header_bytes",
             "max_connection_body_bytes", "max_connections", "max_connections_per_ip",
             "header_timeout_ms", "body_timeout_ms", "idle_timeout_ms", "drain_timeout_ms",
             "metrics_on_main", "trusted_proxies", "busy_poll_us", "memory_release_ms",
             "send_buffer_bytes"});
  readListeners(m, s);
  m.with("http2", [&](const Value& x) { readHttp2(x, s.http2); });
  m.with("workers", [&](const Value& x) { s.workers = x.unsignedInt<unsigned>(0, kMaxWorkers); });
  m.with("max_request_bytes",
         [&](const Value& x) { s.maxRequestBytes = x.unsignedInt<std::uint64_t>(1); });
  m.with("max_header_bytes", [&](const Value& x) {
    s.maxHeaderBytes = x.unsignedInt<std::uint32_t>(kMinHeaderBytes, kMaxHeaderBytes);
  });
  m.with("max_connection_body_bytes",
         [&](const Value& x) { s.maxConnectionBodyBytes = x.unsignedInt<std::uint64_t>(0); });
  m.with("max_connections", [&](const Value& x) {
    s.maxConnections = x.unsignedInt<std::uint32_t>(1, kMaxConnections);
  });
  m.with("max_connections_per_ip", [&](const Value& x) {
    s.maxConnectionsPerIp = x.unsignedInt<std::uint32_t>(0, kMaxConnections);
  });
  m.with("header_timeout_ms",
         [&](const Value& x) { s.headerTimeoutMs = x.unsignedInt<std::uint32_t>(1); });
  m.with("body_timeout_ms",
         [&](const Value& x) { s.bodyTimeoutMs = x.unsignedInt<std::uint32_t>(1); });
  m.with("trusted_proxies", [&](const Value& x) {
    for (const Value& item : x.list()) {
      try {
        s.trustedProxies.push_back(parseCidr(item.string()));
      } catch (const std::invalid_argument& e) {
        item.fail(e.what());
      }
    }
  });
  m.with("idle_timeout_ms",
         [&](const Value& x) { s.idleTimeoutMs = x.unsignedInt<std::uint32_t>(1); });
  m.with("drain_timeout_ms",
         [&](const Value& x) { s.drainTimeoutMs = x.unsignedInt<std::uint32_t>(0); });
  m.with("metrics_on_main", [&](const Value& x) { s.metricsOnMain = x.boolean(); });
  m.with("busy_poll_us",
         [&](const Value& x) { s.busyPollUs = x.unsignedInt<std::uint32_t>(0, kMaxBusyPollUs); });
  m.with("send_buffer_bytes", [&](const Value& x) {
    const auto bytes = x.unsignedInt<std::uint64_t>();
    if (bytes != 0 && (bytes < kMinSendBufferBytes || bytes > kMaxSendBufferBytes))
      x.fail("must be 0 (the kernel's own, growing with the connection) or between " +
             std::to_string(kMinSendBufferBytes) + " and " + std::to_string(kMaxSendBufferBytes) +
             ", got " + x.echo());
    s.sendBufferBytes = static_cast<std::uint32_t>(bytes);
  });
  m.with("memory_release_ms", [&](const Value& x) {
    s.memoryReleaseMs = x.unsignedInt<std::uint32_t>(kMinMemoryReleaseMs, kMaxMemoryReleaseMs);
  });

  if (s.listen.empty() && s.tlsListen.empty()) {
    v.fail("needs at least one listener: set listen or tls_listen");
  }
  if (s.workers == 0) s.workers = usableCores();
  if (s.maxConnectionBodyBytes == 0) s.maxConnectionBodyBytes = 2 * s.maxRequestBytes;
  if (s.maxConnectionBodyBytes < s.maxRequestBytes) {
    m.find("max_connection_body_bytes")
        ->fail("must be at least max_request_bytes (" + std::to_string(s.maxRequestBytes) +
               "), or one request body could never arrive whole");
  }
  return s;
}

Admin readAdmin(const Value& v, const Server& server) {
  Admin a;
  const MapView m = v.map({"listen", "key_sha256"});
  m.with("listen", [&](const Value& x) {
    a.listen = readEndpoint(x);
    if (a.listen->port == 0) return;
    for (const Endpoint& e : server.listen) {
      if (e.host == a.listen->host && e.port == a.listen->port) {
        x.fail("address " + x.echo() + " is also a server.listen address");
      }
    }
    for (const TlsListener& t : server.tlsListen) {
      if (t.address.host == a.listen->host && t.address.port == a.listen->port) {
        x.fail("address " + x.echo() + " is also a server.tls_listen address");
      }
    }
  });
  m.with("key_sha256", [&](const Value& x) {
    // "" (e.g. an unset ${ADMIN_KEY_SHA256:-}) leaves admin actions disabled.
    if (!x.string().empty()) a.keySha256 = readSha256(x);
  });
  return a;
}

Log readLog(const Value& v) {
  Log l;
  const MapView m = v.map({"level", "access_log"});
  m.with("level", [&](const Value& x) {
    l.level = x.string();
    static const std::vector<std::string> kLevels = {"trace", "debug", "info",
                                                     "warn",  "error", "off"};
    if (std::find(kLevels.begin(), kLevels.end(), l.level) == kLevels.end()) {
      x.fail("must be one of trace, debug, info, warn, error, off; got " + x.echo());
    }
  });
  m.with("access_log", [&](const Value& x) { l.accessLog = x.string(); });
  return l;
}

MetricsOptions readMetrics(const Value& v) {
  MetricsOptions o;
  const MapView m = v.map({"node_ids"});
  m.with("node_ids", [&](const Value& x) {
    for (const Value& item : x.list()) {
      std::string id = item.string();
      if (id.empty() || id.size() > 64) item.fail("must be 1 to 64 characters");
      if (id == "other" || id == "none") item.fail("'" + id + "' is reserved for unlisted ids");
      o.nodeIds.push_back(std::move(id));
    }
  });
  return o;
}

Timeouts readTimeouts(const Value& v) {
  Timeouts t;
  const MapView m = v.map({"connect_ms", "first_byte_ms", "idle_ms", "total_ms", "queue_ms"});
  m.with("connect_ms", [&](const Value& x) { t.connectMs = x.unsignedInt<std::uint32_t>(1); });
  m.with("first_byte_ms", [&](const Value& x) { t.firstByteMs = x.unsignedInt<std::uint32_t>(1); });
  m.with("idle_ms", [&](const Value& x) { t.idleMs = x.unsignedInt<std::uint32_t>(1); });
  m.with("total_ms", [&](const Value& x) { t.totalMs = x.unsignedInt<std::uint32_t>(1); });
  m.with("queue_ms", [&](const Value& x) { t.queueMs = x.unsignedInt<std::uint32_t>(0); });
  return t;
}

Retry readRetry(const Value& v) {
  Retry r;
  const MapView m = v.map({"max_attempts", "backoff", "retry_on", "budget"});
  m.with("max_attempts",
         [&](const Value& x) { r.maxAttempts = x.unsignedInt<std::uint32_t>(1, kMaxAttempts); });
  m.with("backoff", [&](const Value& x) {
    const MapView b = x.map({"base_ms", "max_ms"});
    b.with("base_ms", [&](const Value& y) { r.backoff.baseMs = y.unsignedInt<std::uint32_t>(1); });
    b.with("max_ms", [&](const Value& y) { r.backoff.maxMs = y.unsignedInt<std::uint32_t>(1); });
    if (r.backoff.maxMs < r.backoff.baseMs) {
      if (const auto max = b.find("max_ms")) {
        max->fail("must be >= base_ms (" + std::to_string(r.backoff.baseMs) + ")");
      }
      b.find("base_ms")->fail("must be <= max_ms (" + std::to_string(r.backoff.maxMs) +
                              " when not set)");
    }
  });
  m.with("retry_on", [&](const Value& x) {
    r.retryOn.clear();
    for (const Value& item : x.list()) {
      std::string c = item.string();
      if (!isRetryCondition(c)) {
        item.fail("must be connect_error, timeout or an HTTP status code such as 503; got " +
                  item.echo());
      }
      if (std::find(r.retryOn.begin(), r.retryOn.end(), c) != r.retryOn.end()) {
        item.fail(item.echo() + " is listed twice");
      }
      r.retryOn.push_back(std::move(c));
    }
  });
  m.with("budget", [&](const Value& x) {
    const MapView b = x.map({"ratio", "min_per_second"});
    b.with("ratio", [&](const Value& y) { r.budget.ratio = y.number(0, 1); });
    b.with("min_per_second", [&](const Value& y) { r.budget.minPerSecond = y.number(0); });
  });
  return r;
}

Currency readCurrency(const Value& v) {
  Currency c;
  const MapView m = v.map({"code", "per_usd"});
  m.with("code", [&](const Value& x) {
    c.code = x.string();
    if (c.code.size() != 3 || !std::all_of(c.code.begin(), c.code.end(),
                                           [](char ch) { return ch >= 'A' && ch <= 'Z'; })) {
      x.fail("must be a three-letter ISO 4217 code in capitals, such as USD, EUR or CNY");
    }
  });
  m.with("per_usd", [&](const Value& x) {
    c.perUsd = x.number(0);
    if (c.perUsd <= 0) x.fail("must be greater than 0 (units of the currency per US dollar)");
  });
  return c;
}

}  // namespace relay::config::detail
