// YAML -> Config. Every error names file:line:column and the offending key.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "relay/config/config.hpp"

namespace relay::config {

// what() reads "relay.yaml:12:5: upstreams[1].weight: must be a positive integer".
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Resolves ${NAME} in string values; returns nullopt for an unset variable
// (which is an error naming the variable, never a silent empty secret).
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

EnvLookup processEnvironment();

// Parses, expands and validates. Throws ConfigError.
Config parseConfig(std::string_view yamlText, const std::string& sourceName,
                   const EnvLookup& env = processEnvironment());

// Reads `path` and parses it. Throws ConfigError (also for an unreadable file).
Config loadConfigFile(const std::string& path, const EnvLookup& env = processEnvironment());

// One key as the admin API gives it: a JSON object with the fields of a
// `keys[]` entry (name, sha256, models, limits, budget, mcp_servers,
// mcp_tools), checked by the same rules against `context` (the models and MCP
// servers it may name). Throws ConfigError "SOURCE:LINE:COLUMN: PATH: message".
Key parseKeyJson(std::string_view json, const Config& context, const std::string& sourceName);

// Data residency (keys[].regions, routes.MODEL.regions): why `key` is left
// without any upstream it may use for some model it may use — or, with
// `key` null, why the route of `model` has none — naming the model and the
// upstreams' regions; "" when every model keeps one.
std::string residencyProblem(const Config& cfg, const Key* key, std::string_view model = {});

// The JSON object of a key's settings, in the shape parseKeyJson reads (with
// its sha256; never the previous digests).
std::string keyToJson(const Key& key);

// Parses "host:port" / "[v6]:port". Throws std::invalid_argument with a reason.
Endpoint parseEndpoint(std::string_view text);

// "10.0.0.0/8", "fd00::/8", or a bare address. Throws std::invalid_argument
// with a message saying what is wrong.
Cidr parseCidr(std::string_view text);
// True when `address` (16 bytes; IPv4 in the first 4) lies in `block`.
bool cidrContains(const Cidr& block, const std::array<std::uint8_t, 16>& address, bool v6);

}  // namespace relay::config
