// KeyRegistry::importEntries: the runtime keys another replica shares
// (cluster) are taken together where they fit this config, and an entry
// that does not fit is refused by name without keeping the others out.
#include "relay/admission/key_registry.hpp"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "relay/config/parse.hpp"

namespace relay::admission {
namespace {

using nlohmann::json;

constexpr char kFileKeyDigest[] =
    "5b2f3c0d8e4a6b1c9d7e2f0a3b5c8d1e4f6a9b2c5d8e0f3a6b9c1d4e7f0a2b5c";

config::Config fileConfig() {
  const std::string yaml = std::string(R"(server:
  listen: ["127.0.0.1:0"]
upstreams:
  - name: moonshot
    base_url: https://api.moonshot.ai/v1
    models: [kimi-k2]
keys:
  - name: from-file
    sha256: ")") + kFileKeyDigest +
                           "\"\n";
  return config::parseConfig(yaml, "relay.yaml",
                             [](std::string_view) { return std::optional<std::string>(); });
}

// `count` keys made on another replica, as it shares them.
std::map<std::string, std::string> sharedKeys(const config::Config& cfg, int count) {
  KeyRegistry other("");
  for (int i = 0; i < count; ++i) {
    const KeyChangeResult r =
        other.create("agent-" + std::to_string(i), R"({"limits":{"rpm":60}})", cfg);
    EXPECT_FALSE(r.error);
  }
  return other.exportEntries();
}

TEST(KeyRegistryImport, TakesEveryEntryThatFits) {
  const config::Config cfg = fileConfig();
  KeyRegistry here("");
  std::vector<std::string> refused;
  const std::vector<std::string> taken = here.importEntries(sharedKeys(cfg, 300), cfg, refused);
  EXPECT_TRUE(refused.empty());
  EXPECT_EQ(taken.size(), 300u);
  EXPECT_EQ(here.effectiveKeys(cfg).size(), 301u);  // and the file's key
  // Taken again: nothing is newer, nothing changes.
  EXPECT_TRUE(here.importEntries(here.exportEntries(), cfg, refused).empty());
}

TEST(KeyRegistryImport, RefusesOnlyTheEntryThatDoesNotFit) {
  const config::Config cfg = fileConfig();
  std::map<std::string, std::string> shared = sharedKeys(cfg, 3);
  // agent-1 now carries the file key's digest: two keys would authenticate
  // the same secret.
  json clash = json::parse(shared.at("agent-1"));
  clash["settings"]["sha256"] = kFileKeyDigest;
  shared["agent-1"] = clash.dump();
  KeyRegistry here("");
  std::vector<std::string> refused;
  const std::vector<std::string> taken = here.importEntries(shared, cfg, refused);
  EXPECT_EQ(taken, (std::vector<std::string>{"agent-0", "agent-2"}));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("runtime key 'agent-1': its digest is another key's"),
            std::string::npos)
      << refused[0];
  EXPECT_EQ(here.effectiveKeys(cfg).size(), 3u);
}

TEST(KeyRegistryImport, RefusesARuntimeKeyNamedAsAFileKey) {
  const config::Config cfg = fileConfig();
  std::map<std::string, std::string> shared = sharedKeys(cfg, 2);
  json named = json::parse(shared.at("agent-0"));
  named["settings"]["name"] = "from-file";
  shared.erase("agent-0");
  shared["from-file"] = named.dump();
  KeyRegistry here("");
  std::vector<std::string> refused;
  const std::vector<std::string> taken = here.importEntries(shared, cfg, refused);
  EXPECT_EQ(taken, (std::vector<std::string>{"agent-1"}));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("the name is also a key of relay.yaml"), std::string::npos)
      << refused[0];
}

}  // namespace
}  // namespace relay::admission
