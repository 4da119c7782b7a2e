// config/example.yaml parses, uses every key, and needs its ${ENV} secrets.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "config_test_support.hpp"
#include "relay/config/parse.hpp"

namespace relay::config {
namespace {

using testing::fakeEnv;

std::string examplePath() {
  return (std::filesystem::path(__FILE__).parent_path() / "../../../config/example.yaml")
      .lexically_normal()
      .string();
}

EnvLookup exampleEnv() {
  return fakeEnv({
      {"RELAY_ADMIN_KEY_SHA256",
       "8c6976e5b5410415bde908bd4dee15dfb167a9c873fc4bb8a81f6f2ab448a918"},
      {"TEAM_SEARCH_KEY_SHA256",
       "1642b9e9e6f0b83c22be415577ccf26740c62159a59491e2fae89872e04a0660"},
      {"HOLYSHEEP_API_KEY", "sk-holysheep-test"},
      {"MOONSHOT_API_KEY", "sk-moonshot-test"},
      {"SEARCH_MCP_API_KEY", "mcp-search-test"},
      {"RELAY_MCP_SESSION_SECRET", "an-mcp-session-secret-of-32-chars"},
  });
}

TEST(ConfigExample, ParsesWithItsEnvironment) {
  const Config c = loadConfigFile(examplePath(), exampleEnv());
  EXPECT_EQ(c.sourcePath, examplePath());
  EXPECT_EQ(c.server.listen.size(), 2u);
  EXPECT_EQ(c.server.tlsListen.size(), 1u);
  EXPECT_EQ(c.admin.keySha256, "8c6976e5b5410415bde908bd4dee15dfb167a9c873fc4bb8a81f6f2ab448a918");
  ASSERT_EQ(c.keys.size(), 2u);
  EXPECT_EQ(c.keys[0].sha256, "1642b9e9e6f0b83c22be415577ccf26740c62159a59491e2fae89872e04a0660");
  ASSERT_EQ(c.upstreams.size(), 3u);
  EXPECT_EQ(c.upstreams[0].apiKey, "sk-holysheep-test");
  EXPECT_EQ(c.upstreams[1].apiKey, "sk-moonshot-test");
  EXPECT_TRUE(c.upstreams[2].allowInsecureHttp);
  EXPECT_EQ(c.routes.size(), 2u);
  EXPECT_EQ(c.prices.size(), 4u);
  ASSERT_EQ(c.mcp.servers.size(), 2u);
  EXPECT_EQ(c.mcp.servers[1].apiKey, "mcp-search-test");
  EXPECT_EQ(c.mcp.sessionSecret, "an-mcp-session-secret-of-32-chars");
  EXPECT_EQ(c.stateDir, "/var/lib/kimi-relay");  // ${RELAY_STATE_DIR:-...} fallback
}

TEST(ConfigExample, AnUnsetSecretStopsTheLoadAndNamesItsPlace) {
  std::ifstream in(examplePath());
  std::stringstream text;
  text << in.rdbuf();
  // The line that references the admin digest (the first ${...} read).
  std::size_t line = 1;
  const std::string body = text.str();
  const std::size_t at = body.find("key_sha256: ${RELAY_ADMIN_KEY_SHA256}");
  ASSERT_NE(at, std::string::npos);
  for (std::size_t i = 0; i < at; ++i)
    line += body[i] == '\n' ? 1 : 0;
  try {
    loadConfigFile(examplePath(), fakeEnv());
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), examplePath() + ":" + std::to_string(line) +
                                         ":15: admin.key_sha256: environment variable "
                                         "'RELAY_ADMIN_KEY_SHA256' is not set");
  }
}

// Key paths of a YAML tree: list items as [], route names as *, and the
// user's model ids under upstreams[].models left out.
void collectKeys(const YAML::Node& node, const std::string& path, std::set<std::string>& out) {
  if (node.IsSequence()) {
    for (const YAML::Node& item : node)
      collectKeys(item, path + "[]", out);
    return;
  }
  if (!node.IsMap() || path == "upstreams[].models") return;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string key = path == "routes" ? "*" : it->first.as<std::string>();
    const std::string child = path.empty() ? key : path + "." + key;
    out.insert(child);
    collectKeys(it->second, child, out);
  }
}

TEST(ConfigExample, UsesEveryKey) {
  std::set<std::string> present;
  collectKeys(YAML::LoadFile(examplePath()), "", present);
  const std::vector<std::string> every = {"server.listen",
                                          "server.tls_listen[].address",
                                          "server.tls_listen[].cert",
                                          "server.tls_listen[].key",
                                          "server.http2.max_concurrent_streams",
                                          "server.http2.initial_window_bytes",
                                          "server.workers",
                                          "server.max_request_bytes",
                                          "server.header_timeout_ms",
                                          "server.idle_timeout_ms",
                                          "server.drain_timeout_ms",
                                          "server.metrics_on_main",
                                          "admin.listen",
                                          "admin.key_sha256",
                                          "keys[].name",
                                          "keys[].sha256",
                                          "keys[].models",
                                          "keys[].limits.rpm",
                                          "keys[].limits.rpm_burst",
                                          "keys[].limits.tpm",
                                          "keys[].limits.tpm_burst",
                                          "keys[].limits.concurrency",
                                          "keys[].budget.usd",
                                          "keys[].budget.period",
                                          "keys[].budget.max_input_tokens",
                                          "keys[].budget.max_output_tokens",
                                          "keys[].mcp_servers",
                                          "upstreams[].name",
                                          "upstreams[].base_url",
                                          "upstreams[].api_key",
                                          "upstreams[].weight",
                                          "upstreams[].models",
                                          "upstreams[].allow_insecure_http",
                                          "upstreams[].ca_file",
                                          "upstreams[].max_concurrency",
                                          "upstreams[].rpm",
                                          "upstreams[].health.eject_after_failures",
                                          "upstreams[].health.base_ejection_ms",
                                          "upstreams[].health.max_ejection_ms",
                                          "upstreams[].health.active_interval_ms",
                                          "retry.max_attempts",
                                          "retry.backoff.base_ms",
                                          "retry.backoff.max_ms",
                                          "retry.retry_on",
                                          "retry.budget.ratio",
                                          "retry.budget.min_per_second",
                                          "timeouts.connect_ms",
                                          "timeouts.first_byte_ms",
                                          "timeouts.idle_ms",
                                          "timeouts.total_ms",
                                          "routes.*.fallback_models",
                                          "prices[].model",
                                          "prices[].upstream",
                                          "prices[].input",
                                          "prices[].cached_input",
                                          "prices[].output",
                                          "currency.code",
                                          "currency.per_usd",
                                          "mcp.servers[].name",
                                          "mcp.servers[].url",
                                          "mcp.servers[].instances",
                                          "mcp.servers[].api_key",
                                          "mcp.servers[].region",
                                          "mcp.allowed_origins",
                                          "mcp.session_secret",
                                          "default_max_tokens",
                                          "state_dir",
                                          "log.level",
                                          "log.access_log"};
  for (const std::string& key : every)
    EXPECT_TRUE(present.count(key)) << key << " is missing";
}

TEST(ConfigExample, SecretsComeFromTheEnvironment) {
  const YAML::Node root = YAML::LoadFile(examplePath());
  for (const YAML::Node& u : root["upstreams"]) {
    if (u["api_key"]) EXPECT_EQ(u["api_key"].as<std::string>().rfind("${", 0), 0u);
  }
  for (const YAML::Node& s : root["mcp"]["servers"]) {
    if (s["api_key"]) EXPECT_EQ(s["api_key"].as<std::string>().rfind("${", 0), 0u);
  }
  EXPECT_EQ(root["mcp"]["session_secret"].as<std::string>().rfind("${", 0), 0u);
}

}  // namespace
}  // namespace relay::config
