// Every mistake is reported as "FILE:LINE:COLUMN: KEY.PATH: message", pointing
// at the offending value (or key), with 1-based positions.
#include <gtest/gtest.h>

#include "config_test_support.hpp"
#include "relay/config/parse.hpp"

namespace relay::config {
namespace {

using testing::errorOf;
using testing::withMinimal;

TEST(ConfigErrors, YamlSyntaxErrorHasFileLineColumn) {
  EXPECT_EQ(errorOf("server:\n  listen: [a\nupstreams: x\n"),
            "relay.yaml:3:10: invalid YAML: end of sequence flow not found");
}

TEST(ConfigErrors, TabIndentationIsExplained) {
  EXPECT_EQ(errorOf("server:\n\tlisten: x\n"),
            "relay.yaml:2:8: invalid YAML: illegal map value (this line is indented with a tab; "
            "YAML indents with spaces only)");
}

TEST(ConfigErrors, EmptyFileAndSeveralDocuments) {
  EXPECT_EQ(errorOf(""), "relay.yaml: the file holds no configuration");
  EXPECT_EQ(errorOf("# nothing but a comment\n"), "relay.yaml: the file holds no configuration");
  EXPECT_EQ(errorOf(withMinimal("---\nlog: {level: info}\n")),
            "relay.yaml:7:1: expected one YAML document; a second one starts here");
  EXPECT_EQ(errorOf("- server\n"),
            "relay.yaml:1:1: the top level must be a map of sections (server:, upstreams:, ...)");
}

// yaml-cpp 0.7's LoadAll never returns on this input (it allocates until the
// process is killed); the loader must stop with an error instead.
TEST(ConfigErrors, StrayCommaBeforeTheFirstKeyIsASyntaxError) {
  EXPECT_EQ(errorOf(",\n" + std::string(testing::kMinimal)),
            "relay.yaml:1:1: invalid YAML: unexpected ','");
  EXPECT_EQ(errorOf("# comment\n\n  , x\n" + std::string(testing::kMinimal)),
            "relay.yaml:3:3: invalid YAML: unexpected ','");
}

TEST(ConfigErrors, StringWhereAnIntegerIsExpected) {
  EXPECT_EQ(errorOf(withMinimal("retry:\n  max_attempts: three\n")),
            "relay.yaml:8:17: retry.max_attempts: must be an integer between 1 and 100, got "
            "'three'");
  EXPECT_EQ(errorOf(withMinimal("retry:\n  max_attempts: 1.5\n")),
            "relay.yaml:8:17: retry.max_attempts: must be an integer between 1 and 100, got '1.5'");
}

TEST(ConfigErrors, NegativeNumberForAnUnsignedField) {
  EXPECT_EQ(errorOf(withMinimal("timeouts:\n  connect_ms: -5\n")),
            "relay.yaml:8:15: timeouts.connect_ms: must be an integer >= 1, got '-5'");
  EXPECT_EQ(errorOf(withMinimal("default_max_tokens: 0\n")),
            "relay.yaml:7:21: default_max_tokens: must be an integer >= 1, got '0'");
}

TEST(ConfigErrors, IntegerTooLargeForItsField) {
  EXPECT_EQ(errorOf(withMinimal(R"(keys:
  - name: a
    sha256: 6fac8798243b010e8fa02c328f83b51b136055c8f806c34cf339cd1bf3212de3
    limits: {rpm: 99999999999}
)")),
            "relay.yaml:10:19: keys[0].limits.rpm: must be a non-negative integer (at most "
            "4294967295), got '99999999999'");
}

TEST(ConfigErrors, UpstreamWeightOutOfRangeNamesItsIndex) {
  const std::string yaml = R"(server:
  listen: ["127.0.0.1:0"]
upstreams:
  - name: a
    base_url: https://a.example.com/v1
    models: [m]
  - name: b
    base_url: https://b.example.com/v1
    models: [m]
    weight: 0
)";
  EXPECT_EQ(errorOf(yaml),
            "relay.yaml:10:13: upstreams[1].weight: must be an integer between 1 and 1000000, got "
            "'0'");
}

// The idle upstream connections' keys, at both edges of their ranges.
TEST(ConfigErrors, UpstreamIdleLimitsAtTheirEdges) {
  const auto upstreamWith = [](std::string_view line) {
    return R"(server:
  listen: ["127.0.0.1:0"]
upstreams:
  - name: a
    base_url: https://a.example.com/v1
    models: [m]
    )" + std::string(line) +
           "\n";
  };
  EXPECT_EQ(errorOf(upstreamWith("max_idle_ms: 100")), "<parsed>");
  EXPECT_EQ(errorOf(upstreamWith("max_idle_ms: 3600000")), "<parsed>");
  EXPECT_EQ(errorOf(upstreamWith("max_idle_ms: 99")),
            "relay.yaml:7:18: upstreams[0].max_idle_ms: must be an integer between 100 and "
            "3600000, got '99'");
  EXPECT_EQ(errorOf(upstreamWith("max_idle_ms: 3600001")),
            "relay.yaml:7:18: upstreams[0].max_idle_ms: must be an integer between 100 and "
            "3600000, got '3600001'");
  EXPECT_EQ(errorOf(upstreamWith("max_idle_connections: 0")), "<parsed>");
  EXPECT_EQ(errorOf(upstreamWith("max_idle_connections: 1000000")), "<parsed>");
  EXPECT_EQ(errorOf(upstreamWith("max_idle_connections: 1000001")),
            "relay.yaml:7:27: upstreams[0].max_idle_connections: must be an integer between 0 "
            "and 1000000, got '1000001'");
}

// mcp.servers[].max_idle_ms has the upstreams' range.
TEST(ConfigErrors, McpServerIdleTimeHasTheUpstreamsRange) {
  const auto with = [](std::string_view value) {
    return std::string(testing::kMinimal) +
           "mcp:\n  servers:\n    - {name: t, url: \"https://t.example.com/mcp\", max_idle_ms: " +
           std::string(value) + "}\n";
  };
  EXPECT_EQ(errorOf(with("100")), "<parsed>");
  EXPECT_EQ(errorOf(with("3600000")), "<parsed>");
  const std::string range =
      "relay.yaml:9:64: mcp.servers[0].max_idle_ms: must be an integer between 100 and 3600000, "
      "got ";
  EXPECT_EQ(errorOf(with("99")), range + "'99'");
  EXPECT_EQ(errorOf(with("3600001")), range + "'3600001'");
}

// mcp.servers[].max_idle_connections has the upstreams' range.
TEST(ConfigErrors, McpServerIdleConnectionsHaveTheUpstreamsRange) {
  const auto with = [](std::string_view value) {
    return std::string(testing::kMinimal) +
           "mcp:\n  servers:\n    - {name: t, url: \"https://t.example.com/mcp\", "
           "max_idle_connections: " +
           std::string(value) + "}\n";
  };
  EXPECT_EQ(errorOf(with("0")), "<parsed>");
  EXPECT_EQ(errorOf(with("1000000")), "<parsed>");
  EXPECT_EQ(errorOf(with("1000001")),
            "relay.yaml:9:73: mcp.servers[0].max_idle_connections: must be an integer between 0 "
            "and 1000000, got '1000001'");
  EXPECT_EQ(errorOf(with("-1")),
            "relay.yaml:9:73: mcp.servers[0].max_idle_connections: must be an integer between 0 "
            "and 1000000, got '-1'");
}

// server.send_buffer_bytes: 0 (the kernel's) or 4096..64 MiB.
TEST(ConfigErrors, SendBufferBytesAtItsEdges) {
  const auto with = [](std::string_view value) {
    return "server:\n  listen: [\"127.0.0.1:0\"]\n  send_buffer_bytes: " + std::string(value) +
           "\nupstreams:\n  - name: a\n    base_url: https://a.example.com/v1\n    models: [m]\n";
  };
  EXPECT_EQ(errorOf(with("0")), "<parsed>");
  EXPECT_EQ(errorOf(with("4096")), "<parsed>");
  EXPECT_EQ(errorOf(with("67108864")), "<parsed>");
  const std::string range =
      "relay.yaml:3:22: server.send_buffer_bytes: must be 0 (the kernel's own, growing with the "
      "connection) or between 4096 and 67108864, got ";
  EXPECT_EQ(errorOf(with("1")), range + "'1'");
  EXPECT_EQ(errorOf(with("4095")), range + "'4095'");
  EXPECT_EQ(errorOf(with("67108865")), range + "'67108865'");
}

TEST(ConfigErrors, NumbersAndBooleans) {
  EXPECT_EQ(errorOf(withMinimal("retry:\n  budget: {ratio: lots}\n")),
            "relay.yaml:8:19: retry.budget.ratio: must be a number between 0 and 1, got 'lots'");
  EXPECT_EQ(errorOf(withMinimal("retry:\n  budget: {ratio: 1.5}\n")),
            "relay.yaml:8:19: retry.budget.ratio: must be a number between 0 and 1, got '1.5'");
  EXPECT_EQ(errorOf(withMinimal("prices:\n  - {model: kimi-k2, input: .inf, output: 1}\n")),
            "relay.yaml:8:29: prices[0].input: must be a number >= 0, got '.inf'");
  EXPECT_EQ(errorOf(R"(server: {listen: ["127.0.0.1:80"], metrics_on_main: yes}
upstreams: [{name: m, base_url: "https://m", models: [x]}]
)"),
            "relay.yaml:1:53: server.metrics_on_main: must be true or false, got 'yes'");
}

TEST(ConfigErrors, WrongShape) {
  EXPECT_EQ(errorOf(withMinimal("keys:\n  name: a\n")),
            "relay.yaml:8:3: keys: must be a list, not a map");
  EXPECT_EQ(errorOf(withMinimal("retry: [1]\n")),
            "relay.yaml:7:8: retry: must be a map, not a list");
  EXPECT_EQ(errorOf(withMinimal("state_dir: [a]\n")),
            "relay.yaml:7:12: state_dir: must be a string, not a list");
}

TEST(ConfigErrors, EmptyValuePointsAtItsKey) {
  EXPECT_EQ(errorOf(withMinimal("retry:\n  max_attempts:\n")),
            "relay.yaml:8:3: retry.max_attempts: must be an integer between 1 and 100, got no "
            "value");
}

TEST(ConfigErrors, MissingRequiredKeyPointsAtItsMap) {
  const std::string yaml = R"(server:
  listen: ["127.0.0.1:0"]
upstreams:
  - name: moonshot
    models: [kimi-k2]
)";
  EXPECT_EQ(errorOf(yaml), "relay.yaml:4:5: upstreams[0]: missing required key 'base_url'");
  EXPECT_EQ(errorOf("upstreams: []\n"),
            "relay.yaml:1:1: missing required key 'server' (it needs at least one listener: "
            "server.listen or server.tls_listen)");
}

TEST(ConfigErrors, UnknownKeySuggestsTheClosestKnownKey) {
  const std::string yaml = R"(server:
  listen: ["127.0.0.1:0"]
upstreams:
  - name: moonshot
    base_url: https://api.moonshot.ai/v1
    models: [kimi-k2]
    wieght: 2
)";
  EXPECT_EQ(errorOf(yaml),
            "relay.yaml:7:5: upstreams[0]: unknown key 'wieght' (did you mean 'weight'?)");
  EXPECT_EQ(errorOf(withMinimal("upstream: []\n")),
            "relay.yaml:7:1: unknown key 'upstream' (did you mean 'upstreams'?)");
  EXPECT_EQ(errorOf(withMinimal("timeouts: {conect_ms: 5}\n")),
            "relay.yaml:7:12: timeouts: unknown key 'conect_ms' (did you mean 'connect_ms'?)");
}

TEST(ConfigErrors, CamelCaseKeySuggestsSnakeCase) {
  EXPECT_EQ(errorOf(withMinimal("retry:\n  maxAttempts: 2\n")),
            "relay.yaml:8:3: retry: unknown key 'maxAttempts' (did you mean 'max_attempts'?)");
}

TEST(ConfigErrors, UnknownKeyWithNothingCloseListsTheKnownKeys) {
  EXPECT_EQ(errorOf(withMinimal("retry:\n  colour: 2\n")),
            "relay.yaml:8:3: retry: unknown key 'colour' (known keys: max_attempts, backoff, "
            "retry_on, budget)");
  EXPECT_EQ(errorOf(withMinimal("routes:\n  kimi-k2: {fallback: [kimi-k2]}\n")),
            "relay.yaml:8:13: routes.kimi-k2: unknown key 'fallback' (known keys: fallback_models, "
            "strategy, regions)");
}

TEST(ConfigErrors, DuplicateKeys) {
  EXPECT_EQ(errorOf(withMinimal("retry:\n  max_attempts: 2\n  max_attempts: 3\n")),
            "relay.yaml:9:3: retry: duplicate key 'max_attempts' (first at line 8)");
  EXPECT_EQ(errorOf(withMinimal("server: {}\n")),
            "relay.yaml:7:1: duplicate key 'server' (first at line 1)");
}

TEST(ConfigErrors, MapKeysThatAreNotIdentifiersAreBracketedInThePath) {
  EXPECT_EQ(errorOf(withMinimal("routes:\n  gpt-4.1: {fallback_models: [kimi-k2]}\n")),
            "relay.yaml:8:3: routes[\"gpt-4.1\"]: no upstream serves model 'gpt-4.1' (routes are "
            "keyed by a model id listed under some upstream's models)");
}

TEST(ConfigErrors, SourceNameIsTheOneGiven) {
  try {
    parseConfig("server: 1\n", "/etc/kimi-relay/relay.yaml", testing::fakeEnv());
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "/etc/kimi-relay/relay.yaml:1:9: server: must be a map, not a scalar");
  }
}

}  // namespace
}  // namespace relay::config
