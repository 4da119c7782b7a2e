// The gateway's configuration as typed structs with their defaults.
//
// One YAML file maps onto `Config`; docs/configuration.md documents every key.
// Parsing (parse.hpp) fills these structs, expands `${ENV}` secrets, refuses
// unknown keys and names file:line:column and the key of every mistake. Nothing
// here knows about sockets or YAML.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace relay::config {

// "host:port" split once at load time. Port 0 asks the kernel for one (tests).
struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
  std::string text() const;  // "host:port", IPv6 hosts in brackets
  bool operator==(const Endpoint&) const = default;
};

struct TlsListener {
  Endpoint address;
  std::string certFile;  // PEM chain
  std::string keyFile;   // PEM private key
};

struct Http2Settings {
  std::uint32_t maxConcurrentStreams = 256;
  std::uint32_t initialWindowBytes = 1 << 20;  // per stream; grows only as a handler reads
};

// An address block ("10.0.0.0/8", "::1/128"); a bare address is its own /32 or /128.
struct Cidr {
  std::array<std::uint8_t, 16> address{};  // IPv4 in the first 4 bytes
  bool v6 = false;
  unsigned prefix = 0;
  bool operator==(const Cidr&) const = default;
};

struct Server {
  std::vector<Endpoint> listen;  // plaintext: HTTP/1.1 and h2c
  std::vector<TlsListener> tlsListen;
  Http2Settings http2;
  unsigned workers = 0;                      // 0 = cores (parseConfig resolves it)
  std::uint64_t maxRequestBytes = 4u << 20;  // 413 beyond this
  std::uint32_t maxHeaderBytes =
      64u << 10;  // request head (HTTP/1.1) / decoded header list (HTTP/2): 431
  // Request-body bytes one connection may hold at once, over all its streams
  // (HTTP/2 connection window); 0 = 2 x max_request_bytes.
  std::uint64_t maxConnectionBodyBytes = 0;
  std::uint32_t maxConnections = 10'000;      // open client connections, all listeners and workers
  std::uint32_t maxConnectionsPerIp = 1'000;  // per IPv4 address or IPv6 /64; 0 = no cap
  std::uint32_t headerTimeoutMs = 10'000;     // first byte to end of request head
  std::uint32_t bodyTimeoutMs = 30'000;       // end of head to end of body
  std::uint32_t idleTimeoutMs = 75'000;       // keep-alive connection without a request
  std::uint32_t drainTimeoutMs = 30'000;      // SIGTERM: time given to open exchanges
  std::uint32_t busyPollUs = 0;               // a worker polls this long before it sleeps
  std::uint32_t memoryReleaseMs = 10'000;     // each worker's memory tick (app/memory_release.hpp)
  std::uint32_t sendBufferBytes = 0;          // SO_SNDBUF of callers' sockets; 0 = the kernel's
  bool metricsOnMain = false;                 // also serve /metrics on the main port (admin key)
  // Peers whose X-Forwarded-For is kept (the peer is appended); from anyone
  // else it is replaced by the peer's address.
  std::vector<Cidr> trustedProxies;
};

struct Admin {
  std::optional<Endpoint> listen;  // /healthz, /readyz, /metrics, /admin/reload
  std::string keySha256;           // digest of the admin key ("" = admin actions disabled)
};

struct KeyLimits {
  std::uint32_t rpm = 0;          // requests per minute, 0 = unlimited
  std::uint32_t rpmBurst = 0;     // bucket size, 0 = rpm
  std::uint64_t tpm = 0;          // tokens per minute (prompt + completion), 0 = unlimited
  std::uint64_t tpmBurst = 0;     // bucket size, 0 = tpm
  std::uint32_t concurrency = 0;  // requests in flight, 0 = unlimited
};

enum class BudgetPeriod { kDay, kMonth, kTotal };

struct KeyBudget {
  std::optional<double> usd;
  BudgetPeriod period = BudgetPeriod::kMonth;
  std::optional<std::uint64_t> maxInputTokens;
  std::optional<std::uint64_t> maxOutputTokens;
};

// A digest that still authenticates until a time: the old secret of a
// rotated key, valid through its grace period.
struct PreviousDigest {
  std::string sha256;
  std::int64_t untilUnix = 0;  // seconds since the epoch
  bool operator==(const PreviousDigest&) const = default;
};

struct Key {
  std::string name;
  std::string sha256;                           // lowercase hex digest of the caller's key
  std::vector<PreviousDigest> previousDigests;  // rotation grace (admin API); never in YAML
  std::vector<std::string> models;              // allow-list; empty = every model
  KeyLimits limits;
  std::optional<KeyBudget> budget;
  std::vector<std::string> mcpServers;  // allow-list; empty = every server
  // Per MCP server, the tools this key may call (tools/call); a server not
  // listed here allows every tool.
  std::map<std::string, std::vector<std::string>> mcpTools;
  // Data residency: only upstreams whose region is listed may serve this key
  // (retries, failover and fallback models included). Empty = any upstream.
  std::vector<std::string> regions;
};

struct Health {
  std::uint32_t ejectAfterFailures = 5;
  std::uint32_t baseEjectionMs = 30'000;
  std::uint32_t maxEjectionMs = 300'000;
  std::uint32_t activeIntervalMs = 0;  // 0 = no active checks
};

struct Upstream {
  std::string name;
  std::string baseUrl;  // e.g. https://api.moonshot.cn/v1 (no trailing '/')
  std::string apiKey;   // secret, after ${ENV} expansion; never logged; "" = none
  std::uint32_t weight = 1;
  std::map<std::string, std::string> models;  // client model id -> upstream model id
  bool allowInsecureHttp = false;
  std::string caFile;                          // extra trust anchors (PEM); "" = system store
  std::uint32_t maxConcurrency = 0;            // 0 = unlimited
  std::uint32_t rpm = 0;                       // 0 = unlimited
  std::uint64_t maxResponseBytes = 64u << 20;  // non-streamed and error bodies: 502 beyond this
  std::uint64_t maxEventBytes = 1u << 20;      // one SSE event of a stream: an error event beyond
  // Idle keep-alive connections each worker keeps to this upstream for the
  // next requests; one handed back beyond them is closed.
  std::uint32_t maxIdleConnections = 256;
  // How long one of them may stay idle before it is closed: under the
  // upstream's own keep-alive timeout.
  std::uint32_t maxIdleMs = 50'000;
  Health health;
  std::string region;  // where it serves from (free text, e.g. "eu-fra"); "" = unlabelled
};

struct Backoff {
  std::uint32_t baseMs = 100;
  std::uint32_t maxMs = 8'000;
};

struct RetryBudget {
  double ratio = 0.2;
  double minPerSecond = 5;
};

struct Retry {
  std::uint32_t maxAttempts = 3;
  Backoff backoff;
  // "connect_error", "timeout" or an HTTP status as text ("429", "503", ...).
  std::vector<std::string> retryOn = {"connect_error", "timeout", "429", "500",
                                      "502",           "503",     "504"};
  RetryBudget budget;
};

struct Timeouts {
  std::uint32_t connectMs = 3'000;
  std::uint32_t firstByteMs = 15'000;
  std::uint32_t idleMs = 30'000;
  std::uint32_t totalMs = 600'000;
  // When every upstream of a model is at its max_concurrency or rpm, how long a
  // request waits for room before a 429 (bounded by total_ms).
  std::uint32_t queueMs = 5'000;
};

// How a model's upstreams are chosen among (docs/configuration.md "routing").
enum class Strategy { kWeighted, kLeastLatency, kLeastInFlight };

struct Route {
  std::vector<std::string> fallbackModels;
  std::optional<Strategy> strategy;  // unset: routing.strategy
  // Only upstreams in these regions serve this model (with a key's own
  // regions, both must allow). Empty = any.
  std::vector<std::string> regions;
};

struct Routing {
  Strategy strategy = Strategy::kWeighted;  // for models without routes.MODEL.strategy
  double exploration = 0.05;                // least_latency: share of picks made by weight alone
  bool debugHeader = false;                 // x-relay-route on responses: strategy, upstream, score
};

struct Price {
  std::string model;
  std::string upstream;    // "" = any upstream
  double input = 0;        // USD per 1M tokens
  double cachedInput = 0;  // parseConfig: = input unless the file sets it
  double output = 0;
};

struct Currency {
  std::string code = "USD";
  double perUsd = 1.0;
};

struct McpServer {
  std::string name;
  std::vector<std::string> instances;  // http(s) URLs, >= 1; `url:` is one instance
  std::string apiKey;
  std::string region;
  bool allowInsecureHttp = false;              // http:// instances
  std::string caFile;                          // extra trust anchors (PEM); "" = system store
  std::uint64_t maxResponseBytes = 64u << 20;  // JSON answers and one SSE event: 502 / error beyond
  std::uint32_t maxIdleMs = 50'000;        // an idle connection to an instance is kept this long
  std::uint32_t maxIdleConnections = 256;  // idle connections kept per worker and instance
};

struct Mcp {
  std::vector<McpServer> servers;
  std::vector<std::string> allowedOrigins;
  std::string sessionSecret;                // secret; "" or >= 32 characters
  std::uint32_t sessionIdleMs = 3'600'000;  // a session unused this long is ended (upstream DELETE)
};

struct Log {
  std::string level = "info";  // trace|debug|info|warn|error|off
  std::string accessLog;       // "" = off, "stdout", or a file path
};

struct MetricsOptions {
  // X-Node-Id values that become a `node` label (anything else is "other"),
  // so callers cannot grow the series count.
  std::vector<std::string> nodeIds;
};

// A Redis server (cluster.redis_url): redis://[[user]:password@]host[:port][/db],
// rediss:// for TLS. The password is a secret: never logged or echoed.
struct RedisUrl {
  bool tls = false;
  std::string host;
  std::uint16_t port = 6379;
  std::uint32_t db = 0;
  std::string user;      // "" = the default user
  std::string password;  // "" = no AUTH
  // "redis://host:port/db" without credentials, for logs and errors.
  std::string display() const;
};

enum class OnRedisFailure { kLocal, kReject };

// Limits, concurrency and budgets shared by every replica through Redis.
struct Cluster {
  std::optional<RedisUrl> redis;  // absent: each process keeps its own state
  std::uint32_t redisTimeoutMs = 50;
  OnRedisFailure onRedisFailure = OnRedisFailure::kLocal;
  bool operator==(const Cluster& other) const;
};

struct Config {
  std::string sourcePath;  // the file this came from (for messages and reload)
  Server server;
  Admin admin;
  std::vector<Key> keys;
  std::vector<Upstream> upstreams;
  Retry retry;
  Timeouts timeouts;
  std::map<std::string, Route> routes;
  std::vector<Price> prices;
  Currency currency;
  Mcp mcp;
  Cluster cluster;
  Routing routing;
  std::uint64_t defaultMaxTokens = 4096;  // token reservation when a request sets none
  // Caller fields forwarded upstream beyond the built-in allow-list: names,
  // or prefixes ending in '*' (lowercase).
  std::vector<std::string> forwardHeaders;
  std::string stateDir;  // "" = budgets kept in memory only
  Log log;
  MetricsOptions metrics;
};

}  // namespace relay::config
