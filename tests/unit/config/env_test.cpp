// `${NAME}` expansion in scalar values.
#include <cstdlib>

#include <gtest/gtest.h>

#include "config_test_support.hpp"
#include "relay/config/parse.hpp"

namespace relay::config {
namespace {

using testing::errorOf;
using testing::fakeEnv;
using testing::withMinimal;

std::string stateDirOf(std::string_view value, const EnvLookup& env) {
  return parseConfig(withMinimal("state_dir: " + std::string(value) + "\n"), "a.yaml", env)
      .stateDir;
}

TEST(ConfigEnv, ReplacesEveryReferenceInAString) {
  const EnvLookup env = fakeEnv({{"ROOT", "/srv"}, {"APP", "relay"}});
  EXPECT_EQ(stateDirOf("${ROOT}/${APP}/state-${APP}", env), "/srv/relay/state-relay");
  EXPECT_EQ(stateDirOf("\"${ROOT}\"", env), "/srv");
}

TEST(ConfigEnv, DollarDollarIsALiteralDollarAndALoneDollarStays) {
  const EnvLookup env = fakeEnv({{"A", "x"}});
  EXPECT_EQ(stateDirOf("\"/p/$${A}\"", env), "/p/${A}");
  EXPECT_EQ(stateDirOf("\"/p/$$$${A}\"", env), "/p/$${A}");
  EXPECT_EQ(stateDirOf("/p/$A/$", env), "/p/$A/$");
}

TEST(ConfigEnv, FallbackIsUsedWhenUnsetOrEmpty) {
  EXPECT_EQ(stateDirOf("${DIR:-/var/lib/relay}", fakeEnv()), "/var/lib/relay");
  EXPECT_EQ(stateDirOf("${DIR:-/var/lib/relay}", fakeEnv({{"DIR", ""}})), "/var/lib/relay");
  EXPECT_EQ(stateDirOf("${DIR:-/var/lib/relay}", fakeEnv({{"DIR", "/x"}})), "/x");
  EXPECT_EQ(stateDirOf("\"${DIR:-}\"", fakeEnv()), "");
}

TEST(ConfigEnv, SecretsAndNumbersAreExpandedToo) {
  const std::string yaml = R"(server:
  listen: ["127.0.0.1:${PORT}"]
upstreams:
  - name: moonshot
    base_url: ${BASE}
    api_key: ${MOONSHOT_API_KEY}
    weight: ${WEIGHT}
    models: [kimi-k2]
)";
  const Config c = parseConfig(yaml, "a.yaml",
                               fakeEnv({{"PORT", "8088"},
                                        {"BASE", "https://api.moonshot.ai/v1"},
                                        {"MOONSHOT_API_KEY", "sk-live-abc"},
                                        {"WEIGHT", "7"}}));
  EXPECT_EQ(c.server.listen[0].port, 8088);
  EXPECT_EQ(c.upstreams[0].baseUrl, "https://api.moonshot.ai/v1");
  EXPECT_EQ(c.upstreams[0].apiKey, "sk-live-abc");
  EXPECT_EQ(c.upstreams[0].weight, 7u);
}

TEST(ConfigEnv, UnsetVariableIsAnErrorNamingVariableAndKey) {
  const std::string yaml = R"(server:
  listen: ["127.0.0.1:0"]
upstreams:
  - name: moonshot
    base_url: https://api.moonshot.ai/v1
    api_key: ${MOONSHOT_API_KEY}
    models: [kimi-k2]
)";
  EXPECT_EQ(errorOf(yaml),
            "relay.yaml:6:14: upstreams[0].api_key: environment variable 'MOONSHOT_API_KEY' is "
            "not set");
}

TEST(ConfigEnv, EmptyVariableIsAnErrorUnlessAFallbackIsGiven) {
  EXPECT_EQ(errorOf(withMinimal("state_dir: ${DIR}\n"), fakeEnv({{"DIR", ""}})),
            "relay.yaml:7:12: state_dir: environment variable 'DIR' is empty (write '${DIR:-}' to "
            "allow that)");
}

TEST(ConfigEnv, MalformedReferences) {
  EXPECT_EQ(errorOf(withMinimal("state_dir: \"${DIR\"\n")),
            "relay.yaml:7:12: state_dir: unterminated '${' (write '$$' for a literal '$')");
  EXPECT_EQ(errorOf(withMinimal("state_dir: \"${A B}\"\n")),
            "relay.yaml:7:12: state_dir: malformed '${...}': a variable name is letters, digits "
            "and '_' (write '$$' for a literal '$')");
  EXPECT_EQ(errorOf(withMinimal("state_dir: \"${}\"\n")),
            "relay.yaml:7:12: state_dir: malformed '${...}': a variable name is letters, digits "
            "and '_' (write '$$' for a literal '$')");
}

TEST(ConfigEnv, ExpandedValuesAreNotEchoedInTypeErrors) {
  EXPECT_EQ(errorOf(withMinimal("default_max_tokens: ${N}\n"), fakeEnv({{"N", "sk-oops"}})),
            "relay.yaml:7:21: default_max_tokens: must be an integer >= 1, got '${N}' (expanded "
            "value not shown)");
}

TEST(ConfigEnv, KeysAreNotExpanded) {
  EXPECT_EQ(errorOf(withMinimal("retry:\n  ${X}: 1\n"), fakeEnv({{"X", "max_attempts"}})),
            "relay.yaml:8:3: retry: unknown key '${X}' (known keys: max_attempts, backoff, "
            "retry_on, budget)");
}

TEST(ConfigEnv, ProcessEnvironmentReadsTheRealEnvironment) {
  ASSERT_EQ(::setenv("RELAY_CONFIG_TEST_VAR", "from-process", 1), 0);
  const EnvLookup env = processEnvironment();
  EXPECT_EQ(env("RELAY_CONFIG_TEST_VAR"), std::optional<std::string>("from-process"));
  ::unsetenv("RELAY_CONFIG_TEST_VAR");
  EXPECT_EQ(env("RELAY_CONFIG_TEST_VAR"), std::nullopt);
}

}  // namespace
}  // namespace relay::config
