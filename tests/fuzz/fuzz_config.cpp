// The config file: parseConfig on any text, with a fixed environment that
// holds the secrets config/example.yaml and config/demo.yaml name. A mistake
// must surface as a ConfigError naming the file; any other exception escapes
// and libFuzzer reports it, as it does a crash or a sanitizer error.
//
// Input: YAML text. Seeds: corpus/config/ (the shipped configs and variants).
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "relay/config/parse.hpp"

namespace {

std::optional<std::string> fakeEnvironment(std::string_view name) {
  static const std::map<std::string, std::string, std::less<>> kVars = {
      {"RELAY_ADMIN_KEY_SHA256",
       "8c6976e5b5410415bde908bd4dee15dfb167a9c873fc4bb8a81f6f2ab448a918"},
      {"TEAM_SEARCH_KEY_SHA256",
       "1642b9e9e6f0b83c22be415577ccf26740c62159a59491e2fae89872e04a0660"},
      {"HOLYSHEEP_API_KEY", "sk-holysheep-test"},
      {"MOONSHOT_API_KEY", "sk-moonshot-test"},
      {"SEARCH_MCP_API_KEY", "mcp-search-test"},
      {"RELAY_MCP_SESSION_SECRET", "an-mcp-session-secret-of-32-chars"},
      {"RELAY_CLIENT_KEY_SHA256",
       "3b6c3143af5153ddb85deb4afaf40adda49b42a74e0b0aa941c574cd6c12bbaa"},
      {"EMPTY", ""},
      {"WEIRD", "line\nbreak ${NESTED} \"quoted\": [x]"},
  };
  const auto it = kVars.find(name);
  if (it == kVars.end()) return std::nullopt;
  return it->second;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const relay::config::EnvLookup env = fakeEnvironment;
  relay::config::Config config;
  try {
    config = relay::config::parseConfig(text, "fuzz.yaml", env);
  } catch (const relay::config::ConfigError& e) {
    FUZZ_CHECK(std::string_view(e.what()).starts_with("fuzz.yaml"),
               std::string("a config error must name the file: ") + e.what());
    return 0;
  }
  // Accepted: what the gateway later relies on without checking again.
  FUZZ_CHECK(!config.upstreams.empty() || !config.mcp.servers.empty(),
             "an accepted config has something to relay to");
  FUZZ_CHECK(config.server.workers > 0, "parseConfig resolves workers");
  for (const auto& endpoint : config.server.listen) {
    FUZZ_CHECK(relay::config::parseEndpoint(endpoint.text()) == endpoint,
               "a listen address must read back from its text()");
  }
  return 0;
}
