// A valid config lands in the structs field by field; absent keys keep their
// defaults.
#include "relay/config/parse.hpp"

#include <thread>

#include <gtest/gtest.h>

#include "config_test_support.hpp"

namespace relay::config {
namespace {

using testing::fakeEnv;
using testing::kMinimal;

constexpr std::string_view kFull = R"(
server:
  listen: ["127.0.0.1:8080", "[::1]:0"]
  tls_listen:
    - address: "0.0.0.0:8443"
      cert: /tls/cert.pem
      key: /tls/key.pem
  http2: {max_concurrent_streams: 100, initial_window_bytes: 65535}
  workers: 4
  max_request_bytes: 1048576
  header_timeout_ms: 5000
  idle_timeout_ms: 60000
  drain_timeout_ms: 0
  metrics_on_main: true
admin:
  listen: "127.0.0.1:9090"
  key_sha256: 8C6976E5B5410415BDE908BD4DEE15DFB167A9C873FC4BB8A81F6F2AB448A918
keys:
  - name: team-a
    sha256: 1642b9e9e6f0b83c22be415577ccf26740c62159a59491e2fae89872e04a0660
    models: [kimi-k2, fast]
    limits: {rpm: 60, rpm_burst: 10, tpm: 100000, tpm_burst: 5000, concurrency: 4}
    budget: {usd: 12.5, period: day, max_input_tokens: 1000, max_output_tokens: 2000}
    mcp_servers: [tools]
  - name: team-b
    sha256: 6fac8798243b010e8fa02c328f83b51b136055c8f806c34cf339cd1bf3212de3
upstreams:
  - name: holysheep
    base_url: https://api.holysheep.ai/v1/
    api_key: ${HS_KEY}
    weight: 3
    models: {kimi-k2: moonshotai/kimi-k2, fast: moonshotai/kimi-k2-turbo}
    ca_file: /tls/extra.pem
    max_concurrency: 50
    rpm: 900
    health: {eject_after_failures: 2, base_ejection_ms: 1000, max_ejection_ms: 4000,
             active_interval_ms: 500}
  - name: mock
    base_url: http://127.0.0.1:9999/v1
    allow_insecure_http: true
    models: [kimi-k2]
retry:
  max_attempts: 5
  backoff: {base_ms: 50, max_ms: 400}
  retry_on: [connect_error, 503]
  budget: {ratio: 0.5, min_per_second: 1.5}
timeouts: {connect_ms: 100, first_byte_ms: 200, idle_ms: 300, total_ms: 400}
routes:
  fast:
    fallback_models: [kimi-k2]
prices:
  - {model: kimi-k2, input: 0.6, cached_input: 0.15, output: 2.5}
  - {model: kimi-k2, upstream: mock, input: 0, output: 0}
  - {model: fast, input: 2.4, output: 10}
currency: {code: CNY, per_usd: 7.1}
mcp:
  servers:
    - name: tools
      url: http://127.0.0.1:3001/mcp
      allow_insecure_http: true
      api_key: ${MCP_KEY}
      region: eu
    - name: search
      instances: [https://a.example.com/mcp, https://b.example.com/mcp]
  allowed_origins: ["https://app.example.com", "*"]
  session_secret: ${SESSION}
default_max_tokens: 1024
state_dir: /var/lib/relay
log: {level: debug, access_log: stdout}
)";

Config parseFull() {
  return parseConfig(kFull, "full.yaml",
                     fakeEnv({{"HS_KEY", "sk-hs"},
                              {"MCP_KEY", "mcp-secret"},
                              {"SESSION", "0123456789abcdef0123456789abcdef"}}));
}

TEST(ConfigParse, ServerSection) {
  const Config c = parseFull();
  EXPECT_EQ(c.sourcePath, "full.yaml");
  ASSERT_EQ(c.server.listen.size(), 2u);
  EXPECT_EQ(c.server.listen[0].host, "127.0.0.1");
  EXPECT_EQ(c.server.listen[0].port, 8080);
  EXPECT_EQ(c.server.listen[1].host, "::1");
  EXPECT_EQ(c.server.listen[1].port, 0);
  ASSERT_EQ(c.server.tlsListen.size(), 1u);
  EXPECT_EQ(c.server.tlsListen[0].address.text(), "0.0.0.0:8443");
  EXPECT_EQ(c.server.tlsListen[0].certFile, "/tls/cert.pem");
  EXPECT_EQ(c.server.tlsListen[0].keyFile, "/tls/key.pem");
  EXPECT_EQ(c.server.http2.maxConcurrentStreams, 100u);
  EXPECT_EQ(c.server.http2.initialWindowBytes, 65535u);
  EXPECT_EQ(c.server.workers, 4u);
  EXPECT_EQ(c.server.maxRequestBytes, 1048576u);
  EXPECT_EQ(c.server.headerTimeoutMs, 5000u);
  EXPECT_EQ(c.server.idleTimeoutMs, 60000u);
  EXPECT_EQ(c.server.drainTimeoutMs, 0u);
  EXPECT_TRUE(c.server.metricsOnMain);
  ASSERT_TRUE(c.admin.listen.has_value());
  EXPECT_EQ(c.admin.listen->text(), "127.0.0.1:9090");
  // Digests are normalised to lowercase.
  EXPECT_EQ(c.admin.keySha256, "8c6976e5b5410415bde908bd4dee15dfb167a9c873fc4bb8a81f6f2ab448a918");
}

TEST(ConfigParse, KeysSection) {
  const Config c = parseFull();
  ASSERT_EQ(c.keys.size(), 2u);
  const Key& a = c.keys[0];
  EXPECT_EQ(a.name, "team-a");
  EXPECT_EQ(a.sha256, "1642b9e9e6f0b83c22be415577ccf26740c62159a59491e2fae89872e04a0660");
  EXPECT_EQ(a.models, (std::vector<std::string>{"kimi-k2", "fast"}));
  EXPECT_EQ(a.limits.rpm, 60u);
  EXPECT_EQ(a.limits.rpmBurst, 10u);
  EXPECT_EQ(a.limits.tpm, 100000u);
  EXPECT_EQ(a.limits.tpmBurst, 5000u);
  EXPECT_EQ(a.limits.concurrency, 4u);
  ASSERT_TRUE(a.budget.has_value());
  EXPECT_DOUBLE_EQ(*a.budget->usd, 12.5);
  EXPECT_EQ(a.budget->period, BudgetPeriod::kDay);
  EXPECT_EQ(a.budget->maxInputTokens, 1000u);
  EXPECT_EQ(a.budget->maxOutputTokens, 2000u);
  EXPECT_EQ(a.mcpServers, std::vector<std::string>{"tools"});
  const Key& b = c.keys[1];
  EXPECT_EQ(b.name, "team-b");
  EXPECT_TRUE(b.models.empty());
  EXPECT_FALSE(b.budget.has_value());
  EXPECT_EQ(b.limits.rpm, 0u);
  EXPECT_TRUE(b.mcpServers.empty());
}

TEST(ConfigParse, UpstreamsSection) {
  const Config c = parseFull();
  ASSERT_EQ(c.upstreams.size(), 2u);
  const Upstream& hs = c.upstreams[0];
  EXPECT_EQ(hs.name, "holysheep");
  EXPECT_EQ(hs.baseUrl, "https://api.holysheep.ai/v1");  // trailing '/' dropped
  EXPECT_EQ(hs.apiKey, "sk-hs");
  EXPECT_EQ(hs.weight, 3u);
  EXPECT_EQ(hs.models, (std::map<std::string, std::string>{{"kimi-k2", "moonshotai/kimi-k2"},
                                                           {"fast", "moonshotai/kimi-k2-turbo"}}));
  EXPECT_FALSE(hs.allowInsecureHttp);
  EXPECT_EQ(hs.caFile, "/tls/extra.pem");
  EXPECT_EQ(hs.maxConcurrency, 50u);
  EXPECT_EQ(hs.rpm, 900u);
  EXPECT_EQ(hs.health.ejectAfterFailures, 2u);
  EXPECT_EQ(hs.health.baseEjectionMs, 1000u);
  EXPECT_EQ(hs.health.maxEjectionMs, 4000u);
  EXPECT_EQ(hs.health.activeIntervalMs, 500u);
  const Upstream& mock = c.upstreams[1];
  EXPECT_EQ(mock.baseUrl, "http://127.0.0.1:9999/v1");
  EXPECT_TRUE(mock.allowInsecureHttp);
  EXPECT_TRUE(mock.apiKey.empty());
  EXPECT_EQ(mock.weight, 1u);
  // The list form serves each model under its own id.
  EXPECT_EQ(mock.models, (std::map<std::string, std::string>{{"kimi-k2", "kimi-k2"}}));
}

TEST(ConfigParse, RetryTimeoutsRoutesPrices) {
  const Config c = parseFull();
  EXPECT_EQ(c.retry.maxAttempts, 5u);
  EXPECT_EQ(c.retry.backoff.baseMs, 50u);
  EXPECT_EQ(c.retry.backoff.maxMs, 400u);
  EXPECT_EQ(c.retry.retryOn, (std::vector<std::string>{"connect_error", "503"}));
  EXPECT_DOUBLE_EQ(c.retry.budget.ratio, 0.5);
  EXPECT_DOUBLE_EQ(c.retry.budget.minPerSecond, 1.5);
  EXPECT_EQ(c.timeouts.connectMs, 100u);
  EXPECT_EQ(c.timeouts.firstByteMs, 200u);
  EXPECT_EQ(c.timeouts.idleMs, 300u);
  EXPECT_EQ(c.timeouts.totalMs, 400u);
  ASSERT_EQ(c.routes.size(), 1u);
  EXPECT_EQ(c.routes.at("fast").fallbackModels, std::vector<std::string>{"kimi-k2"});
  ASSERT_EQ(c.prices.size(), 3u);
  EXPECT_EQ(c.prices[0].model, "kimi-k2");
  EXPECT_EQ(c.prices[0].upstream, "");
  EXPECT_DOUBLE_EQ(c.prices[0].input, 0.6);
  EXPECT_DOUBLE_EQ(c.prices[0].cachedInput, 0.15);
  EXPECT_DOUBLE_EQ(c.prices[0].output, 2.5);
  EXPECT_EQ(c.prices[1].upstream, "mock");
  EXPECT_DOUBLE_EQ(c.prices[1].input, 0);
  // cached_input absent: priced like input.
  EXPECT_DOUBLE_EQ(c.prices[2].cachedInput, 2.4);
  EXPECT_EQ(c.currency.code, "CNY");
  EXPECT_DOUBLE_EQ(c.currency.perUsd, 7.1);
}

TEST(ConfigParse, McpAndTopLevelScalars) {
  const Config c = parseFull();
  ASSERT_EQ(c.mcp.servers.size(), 2u);
  EXPECT_EQ(c.mcp.servers[0].name, "tools");
  EXPECT_EQ(c.mcp.servers[0].instances, std::vector<std::string>{"http://127.0.0.1:3001/mcp"});
  EXPECT_EQ(c.mcp.servers[0].apiKey, "mcp-secret");
  EXPECT_EQ(c.mcp.servers[0].region, "eu");
  EXPECT_EQ(c.mcp.servers[1].instances,
            (std::vector<std::string>{"https://a.example.com/mcp", "https://b.example.com/mcp"}));
  EXPECT_TRUE(c.mcp.servers[1].apiKey.empty());
  EXPECT_EQ(c.mcp.allowedOrigins, (std::vector<std::string>{"https://app.example.com", "*"}));
  EXPECT_EQ(c.mcp.sessionSecret, "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(c.defaultMaxTokens, 1024u);
  EXPECT_EQ(c.stateDir, "/var/lib/relay");
  EXPECT_EQ(c.log.level, "debug");
  EXPECT_EQ(c.log.accessLog, "stdout");
}

TEST(ConfigParse, AbsentKeysKeepTheirDefaults) {
  const Config c = parseConfig(kMinimal, "min.yaml", fakeEnv());
  const Config d;  // the struct defaults
  EXPECT_EQ(c.server.http2.maxConcurrentStreams, d.server.http2.maxConcurrentStreams);
  EXPECT_EQ(c.server.http2.initialWindowBytes, d.server.http2.initialWindowBytes);
  EXPECT_EQ(c.server.maxRequestBytes, 4u << 20);
  EXPECT_EQ(c.server.headerTimeoutMs, d.server.headerTimeoutMs);
  EXPECT_EQ(c.server.idleTimeoutMs, d.server.idleTimeoutMs);
  EXPECT_EQ(c.server.drainTimeoutMs, d.server.drainTimeoutMs);
  EXPECT_FALSE(c.server.metricsOnMain);
  EXPECT_TRUE(c.server.tlsListen.empty());
  EXPECT_FALSE(c.admin.listen.has_value());
  EXPECT_EQ(c.admin.keySha256, "");
  EXPECT_TRUE(c.keys.empty());
  EXPECT_EQ(c.upstreams[0].weight, 1u);
  EXPECT_EQ(c.upstreams[0].health.ejectAfterFailures, 5u);
  EXPECT_EQ(c.upstreams[0].health.baseEjectionMs, 30'000u);
  EXPECT_EQ(c.upstreams[0].health.maxEjectionMs, 300'000u);
  EXPECT_EQ(c.upstreams[0].health.activeIntervalMs, 0u);
  EXPECT_EQ(c.retry.maxAttempts, 3u);
  EXPECT_EQ(c.retry.backoff.baseMs, 100u);
  EXPECT_EQ(c.retry.backoff.maxMs, 8'000u);
  EXPECT_EQ(c.retry.retryOn, d.retry.retryOn);
  EXPECT_DOUBLE_EQ(c.retry.budget.ratio, 0.2);
  EXPECT_DOUBLE_EQ(c.retry.budget.minPerSecond, 5);
  EXPECT_EQ(c.timeouts.connectMs, 3'000u);
  EXPECT_EQ(c.timeouts.firstByteMs, 15'000u);
  EXPECT_EQ(c.timeouts.idleMs, 30'000u);
  EXPECT_EQ(c.timeouts.totalMs, 600'000u);
  EXPECT_TRUE(c.routes.empty());
  EXPECT_TRUE(c.prices.empty());
  EXPECT_EQ(c.currency.code, "USD");
  EXPECT_DOUBLE_EQ(c.currency.perUsd, 1.0);
  EXPECT_TRUE(c.mcp.servers.empty());
  EXPECT_EQ(c.defaultMaxTokens, 4096u);
  EXPECT_EQ(c.stateDir, "");
  EXPECT_EQ(c.log.level, "info");
  EXPECT_EQ(c.log.accessLog, "");
}

TEST(ConfigParse, WorkersZeroOrAbsentMeansOnePerCore) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_EQ(parseConfig(kMinimal, "a.yaml", fakeEnv()).server.workers, cores);
  const std::string zero = R"(server: {listen: ["127.0.0.1:0"], workers: 0}
upstreams: [{name: m, base_url: "https://m.example.com", models: [x]}]
)";
  EXPECT_EQ(parseConfig(zero, "a.yaml", fakeEnv()).server.workers, cores);
}

// server.busy_poll_us: absent means sleep at once; the ceiling (1000) is
// taken, one more is refused with the range.
TEST(ConfigParse, BusyPollIsOffByDefaultAndBoundedAtOneMillisecond) {
  EXPECT_EQ(parseConfig(kMinimal, "a.yaml", fakeEnv()).server.busyPollUs, 0u);
  const auto withPoll = [](const std::string& value) {
    return R"(server: {listen: ["127.0.0.1:0"], busy_poll_us: )" + value + R"(}
upstreams: [{name: m, base_url: "https://m.example.com", models: [x]}]
)";
  };
  EXPECT_EQ(parseConfig(withPoll("1000"), "a.yaml", fakeEnv()).server.busyPollUs, 1000u);
  EXPECT_EQ(parseConfig(withPoll("0"), "a.yaml", fakeEnv()).server.busyPollUs, 0u);
  try {
    parseConfig(withPoll("1001"), "a.yaml", fakeEnv());
    ADD_FAILURE() << "1001 accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "server.busy_poll_us: must be an integer between 0 and 1000, got '1001'"),
              std::string::npos)
        << e.what();
  }
}

// server.memory_release_ms: 10 s when absent; 100 ms and an hour are taken,
// one less and one more are refused with the range.
TEST(ConfigParse, MemoryReleaseIntervalIsBounded) {
  EXPECT_EQ(parseConfig(kMinimal, "a.yaml", fakeEnv()).server.memoryReleaseMs, 10'000u);
  const auto withInterval = [](const std::string& value) {
    return R"(server: {listen: ["127.0.0.1:0"], memory_release_ms: )" + value + R"(}
upstreams: [{name: m, base_url: "https://m.example.com", models: [x]}]
)";
  };
  EXPECT_EQ(parseConfig(withInterval("100"), "a.yaml", fakeEnv()).server.memoryReleaseMs, 100u);
  EXPECT_EQ(parseConfig(withInterval("3600000"), "a.yaml", fakeEnv()).server.memoryReleaseMs,
            3'600'000u);
  for (const char* refused : {"99", "3600001", "0"}) {
    try {
      parseConfig(withInterval(refused), "a.yaml", fakeEnv());
      ADD_FAILURE() << refused << " accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(
                    std::string("server.memory_release_ms: must be an integer between 100 and "
                                "3600000, got '") +
                    refused + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

// server.send_buffer_bytes and upstreams[].max_idle_ms / max_idle_connections:
// the defaults when absent, and the values given kept as given.
TEST(ConfigParse, SendBufferAndIdleUpstreamKeysKeepTheirValues) {
  const Config defaults = parseConfig(kMinimal, "a.yaml", fakeEnv());
  EXPECT_EQ(defaults.server.sendBufferBytes, 0u);
  EXPECT_EQ(defaults.upstreams.at(0).maxIdleMs, 50'000u);
  EXPECT_EQ(defaults.upstreams.at(0).maxIdleConnections, 256u);
  const Config set = parseConfig(R"(server: {listen: ["127.0.0.1:0"], send_buffer_bytes: 16384}
upstreams:
  - {name: m, base_url: "https://m.example.com", models: [x], max_idle_ms: 1500,
     max_idle_connections: 7}
mcp:
  servers: [{name: t, url: "https://t.example.com/mcp", max_idle_ms: 2500, max_idle_connections: 3},
            {name: u, url: "https://u.example.com/mcp"}]
)",
                                 "a.yaml", fakeEnv());
  EXPECT_EQ(set.server.sendBufferBytes, 16384u);
  EXPECT_EQ(set.upstreams.at(0).maxIdleMs, 1500u);
  EXPECT_EQ(set.upstreams.at(0).maxIdleConnections, 7u);
  EXPECT_EQ(set.mcp.servers.at(0).maxIdleMs, 2500u);
  EXPECT_EQ(set.mcp.servers.at(1).maxIdleMs, 50'000u);  // absent: the default
  EXPECT_EQ(set.mcp.servers.at(0).maxIdleConnections, 3u);
  EXPECT_EQ(set.mcp.servers.at(1).maxIdleConnections, 256u);
}

TEST(ConfigParse, EmptySectionsAndSingleListenAddress) {
  const std::string yaml = R"(server:
  listen: "127.0.0.1:0"
admin:
keys: []
upstreams:
  - {name: m, base_url: "https://m.example.com", models: {x: y}}
routes: {}
log:
)";
  const Config c = parseConfig(yaml, "a.yaml", fakeEnv());
  ASSERT_EQ(c.server.listen.size(), 1u);
  EXPECT_EQ(c.server.listen[0].text(), "127.0.0.1:0");
  EXPECT_TRUE(c.keys.empty());
  EXPECT_EQ(c.log.level, "info");
}

TEST(ConfigParse, McpOnlyGatewayNeedsNoUpstream) {
  const std::string yaml = R"(server: {listen: ["127.0.0.1:0"]}
mcp:
  servers: [{name: tools, url: "http://127.0.0.1:3001/mcp", allow_insecure_http: true}]
)";
  const Config c = parseConfig(yaml, "a.yaml", fakeEnv());
  EXPECT_TRUE(c.upstreams.empty());
  EXPECT_EQ(c.mcp.servers.size(), 1u);
}

TEST(ConfigParse, YamlAnchorsAndMergeKeys) {
  const std::string yaml = R"(server: {listen: ["127.0.0.1:0"]}
upstreams:
  - name: a
    base_url: https://a.example.com/v1
    models: [m]
    health: &strict {eject_after_failures: 1, base_ejection_ms: 10, max_ejection_ms: 20}
  - name: b
    base_url: https://b.example.com/v1
    models: [m]
    health:
      <<: *strict
      max_ejection_ms: 99
)";
  const Config c = parseConfig(yaml, "a.yaml", fakeEnv());
  EXPECT_EQ(c.upstreams[1].health.ejectAfterFailures, 1u);
  EXPECT_EQ(c.upstreams[1].health.baseEjectionMs, 10u);
  EXPECT_EQ(c.upstreams[1].health.maxEjectionMs, 99u);  // the explicit key wins
}

TEST(ConfigParse, LoadConfigFileReportsAnUnreadableFile) {
  try {
    loadConfigFile("/nonexistent/relay.yaml", fakeEnv());
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "/nonexistent/relay.yaml: cannot open: No such file or directory");
  }
  try {
    loadConfigFile("/", fakeEnv());
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "/: is a directory, not a config file");
  }
}

}  // namespace
}  // namespace relay::config
