// Rules beyond types: listeners, URLs, names, digests and references between
// sections.
#include <gtest/gtest.h>

#include "config_test_support.hpp"
#include "relay/config/parse.hpp"

namespace relay::config {
namespace {

using testing::errorOf;
using testing::fakeEnv;
using testing::withMinimal;

constexpr std::string_view kDigest =
    "6fac8798243b010e8fa02c328f83b51b136055c8f806c34cf339cd1bf3212de3";

std::string oneKey(std::string_view extra) {
  return withMinimal("keys:\n  - name: a\n    sha256: " + std::string(kDigest) + "\n" +
                     std::string(extra));
}

TEST(ConfigValidate, NeedsAListener) {
  EXPECT_EQ(errorOf("server:\n  workers: 2\nupstreams: []\n"),
            "relay.yaml:2:3: server: needs at least one listener: set listen or tls_listen");
}

TEST(ConfigValidate, ListenAddressesMustParse) {
  EXPECT_EQ(errorOf("server:\n  listen: [\"localhost\"]\n"),
            "relay.yaml:2:12: server.listen[0]: invalid address 'localhost': missing ':port'; "
            "expected host:port, e.g. 127.0.0.1:8080");
  EXPECT_EQ(errorOf("server:\n  listen: [\"127.0.0.1:8080\", \"127.0.0.1:8080\"]\n"),
            "relay.yaml:2:30: server.listen[1]: address '127.0.0.1:8080' is listed twice (first "
            "at line 2)");
}

TEST(ConfigValidate, TlsListenerNeedsCertAndKey) {
  EXPECT_EQ(errorOf(R"(server: {tls_listen: [{address: "0.0.0.0:443", cert: a}]}
upstreams: [{name: m, base_url: "https://m", models: [x]}]
)"),
            "relay.yaml:1:23: server.tls_listen[0]: missing required key 'key'");
}

TEST(ConfigValidate, AdminListenMustNotReuseAServerAddress) {
  EXPECT_EQ(
      errorOf(R"(server: {listen: ["127.0.0.1:80"]}
admin: {listen: "127.0.0.1:80"}
upstreams: [{name: m, base_url: "https://m", models: [x]}]
)"),
      "relay.yaml:2:17: admin.listen: address '127.0.0.1:80' is also a server.listen address");
}

TEST(ConfigValidate, MetricsOnMainNeedsTheAdminKey) {
  EXPECT_EQ(errorOf(R"(server: {listen: ["127.0.0.1:80"], metrics_on_main: true}
upstreams: [{name: m, base_url: "https://m", models: [x]}]
)"),
            "relay.yaml:1:53: server.metrics_on_main: needs admin.key_sha256: /metrics on the main "
            "port is served only to the admin key");
}

TEST(ConfigValidate, NeedsSomethingToRelayTo) {
  EXPECT_EQ(
      errorOf("server:\n  listen: [\"127.0.0.1:0\"]\n"),
      "relay.yaml:1:1: missing required key 'upstreams' (or mcp.servers): nothing to relay to");
  EXPECT_EQ(errorOf("server:\n  listen: [\"127.0.0.1:0\"]\nupstreams: []\n"),
            "relay.yaml:3:12: upstreams: must list at least one upstream (or configure "
            "mcp.servers)");
}

std::string upstreamWith(std::string_view lines) {
  return "server:\n  listen: [\"127.0.0.1:0\"]\nupstreams:\n  - name: mock\n" + std::string(lines);
}

TEST(ConfigValidate, PlainHttpUpstreamIsRefusedUnlessAllowed) {
  const std::string insecure =
      upstreamWith("    base_url: http://127.0.0.1:9/v1\n    models: [m]\n");
  EXPECT_EQ(
      errorOf(insecure),
      "relay.yaml:5:15: upstreams[0].base_url: plain http:// is refused: the upstream key and "
      "the prompts would cross the network unencrypted; use https://, or set "
      "allow_insecure_http: true on this upstream (e.g. for a local mock)");
  const Config c = parseConfig(insecure + "    allow_insecure_http: true\n", "a.yaml", fakeEnv());
  EXPECT_EQ(c.upstreams[0].baseUrl, "http://127.0.0.1:9/v1");
}

TEST(ConfigValidate, BaseUrlMustBeHttpOrHttps) {
  EXPECT_EQ(errorOf(upstreamWith("    base_url: ftp://h/v1\n    models: [m]\n")),
            "relay.yaml:5:15: upstreams[0].base_url: must be a URL starting with https:// or "
            "http://");
  EXPECT_EQ(errorOf(upstreamWith("    base_url: https://h/v1?x=1\n    models: [m]\n")),
            "relay.yaml:5:15: upstreams[0].base_url: must not contain a query ('?') or a fragment "
            "('#')");
  EXPECT_EQ(errorOf(upstreamWith("    base_url: https://h:99999/v1\n    models: [m]\n")),
            "relay.yaml:5:15: upstreams[0].base_url: has an invalid host or port: port must be a "
            "number between 0 and 65535");
}

TEST(ConfigValidate, UpstreamModelsAndNames) {
  EXPECT_EQ(errorOf(upstreamWith("    base_url: https://h/v1\n    models: []\n")),
            "relay.yaml:6:13: upstreams[0].models: must name at least one model this upstream "
            "serves");
  EXPECT_EQ(errorOf(upstreamWith("    base_url: https://h/v1\n    models: m\n")),
            "relay.yaml:6:13: upstreams[0].models: must be a map {client_model_id: "
            "upstream_model_id} or a list of model ids");
  EXPECT_EQ(errorOf(upstreamWith("    base_url: https://h/v1\n    models: [m]\n"
                                 "  - name: mock\n    base_url: https://g/v1\n    models: [m]\n")),
            "relay.yaml:7:5: upstreams[1].name: upstream name 'mock' is already used at line 4");
  EXPECT_EQ(errorOf("server:\n  listen: [\"127.0.0.1:0\"]\nupstreams:\n  - name: a b\n"
                    "    base_url: https://h/v1\n    models: [m]\n"),
            "relay.yaml:4:11: upstreams[0].name: 'a b' is not a valid name: use 1 to 64 letters, "
            "digits, '.', '_' or '-'");
}

TEST(ConfigValidate, HealthEjectionBounds) {
  EXPECT_EQ(errorOf(upstreamWith("    base_url: https://h/v1\n    models: [m]\n"
                                 "    health: {base_ejection_ms: 500, max_ejection_ms: 100}\n")),
            "relay.yaml:7:54: upstreams[0].health.max_ejection_ms: must be >= base_ejection_ms "
            "(500)");
}

TEST(ConfigValidate, KeyDigestsAreSha256Hex) {
  EXPECT_EQ(errorOf(withMinimal("keys:\n  - name: a\n    sha256: abc\n")),
            "relay.yaml:9:13: keys[0].sha256: must be a SHA-256 digest: 64 hexadecimal characters "
            "(got 3 characters; store the digest of the key, never the key itself)");
  std::string notHex(kDigest);
  notHex[10] = 'z';
  EXPECT_EQ(errorOf(withMinimal("keys:\n  - name: a\n    sha256: " + notHex + "\n")),
            "relay.yaml:9:13: keys[0].sha256: must be a SHA-256 digest: 64 hexadecimal characters "
            "(found a character that is not a hex digit)");
  EXPECT_EQ(errorOf(withMinimal("keys:\n  - name: a\n")),
            "relay.yaml:8:5: keys[0]: missing required key 'sha256'");
}

TEST(ConfigValidate, KeyNamesAndDigestsAreUnique) {
  EXPECT_EQ(errorOf(oneKey("  - name: a\n    sha256: " + std::string(64, 'b') + "\n")),
            "relay.yaml:10:5: keys[1].name: key name 'a' is already used");
  EXPECT_EQ(errorOf(oneKey("  - name: b\n    sha256: " + std::string(kDigest) + "\n")),
            "relay.yaml:11:5: keys[1].sha256: the same digest is already used by key 'a'");
}

TEST(ConfigValidate, KeyAllowListsNameConfiguredModelsAndServers) {
  EXPECT_EQ(errorOf(oneKey("    models: [kimi-k2, kimi-k3]\n")),
            "relay.yaml:10:23: keys[0].models[1]: no upstream serves model 'kimi-k3'");
  EXPECT_EQ(errorOf(oneKey("    models: [kimi-k2, kimi-k2]\n")),
            "relay.yaml:10:23: keys[0].models[1]: 'kimi-k2' is listed twice");
  EXPECT_EQ(errorOf(oneKey("    mcp_servers: [tools]\n")),
            "relay.yaml:10:19: keys[0].mcp_servers[0]: mcp.servers has no server named 'tools'");
}

TEST(ConfigValidate, KeyBudgetAndLimits) {
  EXPECT_EQ(
      errorOf(oneKey("    budget: {period: week, usd: 1}\n")),
      "relay.yaml:10:22: keys[0].budget.period: must be one of day, month, total; got 'week'");
  EXPECT_EQ(errorOf(oneKey("    budget: {period: day}\n")),
            "relay.yaml:10:13: keys[0].budget: sets no limit: give usd, max_input_tokens or "
            "max_output_tokens");
  EXPECT_EQ(errorOf(oneKey("    budget: {usd: -1}\n")),
            "relay.yaml:10:19: keys[0].budget.usd: must be a number >= 0, got '-1'");
  EXPECT_EQ(errorOf(oneKey("    limits: {rpm_burst: 5}\n")),
            "relay.yaml:10:25: keys[0].limits.rpm_burst: has no effect without rpm (the refill "
            "rate)");
  const Config c =
      parseConfig(oneKey("    budget: {max_output_tokens: 10}\n"), "a.yaml", fakeEnv());
  EXPECT_EQ(c.keys[0].budget->period, BudgetPeriod::kMonth);
  EXPECT_FALSE(c.keys[0].budget->usd.has_value());
}

TEST(ConfigValidate, RetrySection) {
  EXPECT_EQ(errorOf(withMinimal("retry: {max_attempts: 0}\n")),
            "relay.yaml:7:23: retry.max_attempts: must be an integer between 1 and 100, got '0'");
  EXPECT_EQ(errorOf(withMinimal("retry: {backoff: {base_ms: 500, max_ms: 100}}\n")),
            "relay.yaml:7:41: retry.backoff.max_ms: must be >= base_ms (500)");
  EXPECT_EQ(errorOf(withMinimal("retry: {backoff: {base_ms: 9000}}\n")),
            "relay.yaml:7:28: retry.backoff.base_ms: must be <= max_ms (8000 when not set)");
  EXPECT_EQ(errorOf(withMinimal("retry: {retry_on: [404x]}\n")),
            "relay.yaml:7:20: retry.retry_on[0]: must be connect_error, timeout or an HTTP status "
            "code such as 503; got '404x'");
  const Config none = parseConfig(withMinimal("retry: {retry_on: []}\n"), "a.yaml", fakeEnv());
  EXPECT_TRUE(none.retry.retryOn.empty());
}

TEST(ConfigValidate, RoutesNameServedModels) {
  EXPECT_EQ(errorOf(withMinimal("routes:\n  kimi-k2: {fallback_models: [gpt-4.1]}\n")),
            "relay.yaml:8:31: routes.kimi-k2.fallback_models[0]: no upstream serves model "
            "'gpt-4.1'");
  EXPECT_EQ(
      errorOf(withMinimal("routes:\n  kimi-k2: {fallback_models: [kimi-k2]}\n")),
      "relay.yaml:8:31: routes.kimi-k2.fallback_models[0]: a model cannot be its own fallback");
}

TEST(ConfigValidate, Prices) {
  EXPECT_EQ(errorOf(withMinimal("prices:\n  - {model: kimi-k2, input: -1, output: 1}\n")),
            "relay.yaml:8:29: prices[0].input: must be a number >= 0, got '-1'");
  EXPECT_EQ(errorOf(withMinimal("prices:\n  - {model: kimi-k2, output: 1}\n")),
            "relay.yaml:8:5: prices[0]: missing required key 'input'");
  EXPECT_EQ(errorOf(withMinimal("prices:\n  - {model: kimi-k3, input: 1, output: 1}\n")),
            "relay.yaml:8:13: prices[0].model: no upstream serves model 'kimi-k3'");
  EXPECT_EQ(
      errorOf(withMinimal("prices:\n  - {model: kimi-k2, upstream: other, input: 1, output: 1}\n")),
      "relay.yaml:8:32: prices[0].upstream: no upstream is named 'other'");
  EXPECT_EQ(errorOf(withMinimal("prices:\n  - {model: kimi-k2, input: 1, output: 1}\n"
                                "  - {model: kimi-k2, input: 2, output: 1}\n")),
            "relay.yaml:9:5: prices[1]: model 'kimi-k2' already has a price");
}

TEST(ConfigValidate, CurrencyAndLog) {
  EXPECT_EQ(
      errorOf(withMinimal("currency: {code: usd}\n")),
      "relay.yaml:7:18: currency.code: must be a three-letter ISO 4217 code in capitals, such "
      "as USD, EUR or CNY");
  EXPECT_EQ(errorOf(withMinimal("currency: {per_usd: 0}\n")),
            "relay.yaml:7:21: currency.per_usd: must be greater than 0 (units of the currency per "
            "US dollar)");
  EXPECT_EQ(errorOf(withMinimal("log: {level: loud}\n")),
            "relay.yaml:7:14: log.level: must be one of trace, debug, info, warn, error, off; got "
            "'loud'");
}

TEST(ConfigValidate, McpServers) {
  EXPECT_EQ(errorOf(withMinimal("mcp:\n  servers:\n    - {name: a, url: \"https://x/mcp\"}\n"
                                "    - {name: a, url: \"https://y/mcp\"}\n")),
            "relay.yaml:10:8: mcp.servers[1].name: MCP server name 'a' is already used");
  EXPECT_EQ(errorOf(withMinimal("mcp:\n  servers:\n    - {name: a, url: \"x/mcp\"}\n")),
            "relay.yaml:9:22: mcp.servers[0].url: must be a URL starting with https:// or http://");
  EXPECT_EQ(errorOf(withMinimal("mcp:\n  servers:\n    - {name: a}\n")),
            "relay.yaml:9:7: mcp.servers[0]: missing required key 'url' (or 'instances')");
  EXPECT_EQ(
      errorOf(withMinimal("mcp:\n  servers:\n"
                          "    - {name: a, url: \"https://x/mcp\", instances: [\"https://y\"]}\n")),
      "relay.yaml:9:39: mcp.servers[0].instances: give either url or instances, not both");
  // Plain http:// only where the server says so.
  EXPECT_EQ(errorOf(withMinimal("mcp:\n  servers:\n    - {name: a, url: \"http://x/mcp\"}\n")),
            "relay.yaml:9:22: mcp.servers[0].url: plain http:// is refused: the server's "
            "credential and the tool traffic would cross the network unencrypted; use https://, "
            "or set allow_insecure_http: true on this server (e.g. for one on loopback)");
  EXPECT_NO_THROW(parseConfig(
      withMinimal(
          "mcp:\n  servers:\n    - {name: a, url: \"http://x/mcp\", allow_insecure_http: true}\n"),
      "relay.yaml", fakeEnv()));
  EXPECT_EQ(errorOf(withMinimal("mcp:\n  servers:\n    - {name: a, instances: []}\n")),
            "relay.yaml:9:28: mcp.servers[0].instances: must list at least one URL");
  EXPECT_EQ(errorOf(withMinimal("mcp:\n  allowed_origins: [\"https://a.example.com/\"]\n")),
            "relay.yaml:8:21: mcp.allowed_origins[0]: an origin has no path: write "
            "scheme://host[:port] without a trailing '/'");
}

}  // namespace
}  // namespace relay::config
