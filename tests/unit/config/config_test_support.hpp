// Helpers shared by the config unit tests.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "relay/config/parse.hpp"

namespace relay::config::testing {

// An environment with exactly these variables.
inline EnvLookup fakeEnv(std::map<std::string, std::string> vars = {}) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    const auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// Parses `yaml` as "relay.yaml" and returns the ConfigError text, or
// "<parsed>" when the text was accepted.
inline std::string errorOf(std::string_view yaml, const EnvLookup& env = fakeEnv()) {
  try {
    parseConfig(yaml, "relay.yaml", env);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<parsed>";
}

// The smallest valid config (6 lines); tests append sections after it, so
// their line numbers start at 7.
inline constexpr std::string_view kMinimal = R"(server:
  listen: ["127.0.0.1:0"]
upstreams:
  - name: moonshot
    base_url: https://api.moonshot.ai/v1
    models: [kimi-k2, moonshot-v1-8k]
)";

inline std::string withMinimal(std::string_view tail) {
  return std::string(kMinimal) + std::string(tail);
}

}  // namespace relay::config::testing
