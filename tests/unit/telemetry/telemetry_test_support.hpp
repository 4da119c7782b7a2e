// A small config and helpers shared by the telemetry tests.
#pragma once

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "relay/config/config.hpp"
#include "relay/telemetry/record.hpp"

namespace relay::telemetry::test {

// Strings that must never appear in a log line or a scrape.
inline constexpr std::string_view kCallerKeyDigest =
    "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8";
inline constexpr std::string_view kUpstreamSecret = "sk-UPSTREAM-SECRET-do-not-log-0123456789";
inline constexpr std::string_view kMcpSecret = "mcp-SECRET-token-abcdef";
inline constexpr std::string_view kSessionSecret = "session-secret-0123456789abcdef0123456789";

// Keys team-a, team-b; upstreams holysheep (kimi-k2, kimi-k2-turbo) and
// moonshot (kimi-k2, moonshot-v1-8k); kimi-k2 priced model-wide and cheaper on
// holysheep; moonshot-v1-8k has no price.
inline config::Config makeConfig() {
  config::Config c;
  for (const char* name : {"team-a", "team-b"}) {
    config::Key k;
    k.name = name;
    k.sha256 = std::string(kCallerKeyDigest);
    c.keys.push_back(k);
  }
  config::Upstream hs;
  hs.name = "holysheep";
  hs.baseUrl = "https://api.holysheep.example/v1";
  hs.apiKey = std::string(kUpstreamSecret);
  hs.models = {{"kimi-k2", "kimi-k2-0905-preview"}, {"kimi-k2-turbo", "kimi-k2-turbo-preview"}};
  config::Upstream ms = hs;
  ms.name = "moonshot";
  ms.baseUrl = "https://api.moonshot.cn/v1";
  ms.models = {{"kimi-k2", "kimi-k2-0905-preview"}, {"moonshot-v1-8k", "moonshot-v1-8k"}};
  c.upstreams = {hs, ms};
  c.prices = {
      config::Price{"kimi-k2", "", 0.60, 0.15, 2.50},
      config::Price{"kimi-k2", "holysheep", 0.50, 0.12, 2.00},
      config::Price{"kimi-k2-turbo", "", 2.40, 0.60, 10.00},
  };
  config::McpServer everything;
  everything.name = "everything";
  everything.instances = {"http://127.0.0.1:3001/mcp"};
  everything.apiKey = std::string(kMcpSecret);
  c.mcp.servers.push_back(everything);
  c.mcp.sessionSecret = std::string(kSessionSecret);
  return c;
}

// Label-space ids of makeConfig(): models sort as kimi-k2, kimi-k2-turbo, moonshot-v1-8k.
inline constexpr std::uint32_t kTeamA = 0, kTeamB = 1;
inline constexpr std::uint32_t kKimiK2 = 0, kKimiK2Turbo = 1, kMoonshot8k = 2;
inline constexpr std::uint32_t kHolySheep = 0, kMoonshotUp = 1;

// The value of the series printed exactly as `series` (name{labels} as the
// text format writes it, labels in name order), or nullopt.
inline std::optional<double> sample(const std::string& exposition, std::string_view series) {
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return std::nullopt;
}

}  // namespace relay::telemetry::test
