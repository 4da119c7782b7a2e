#include "relay/telemetry/labels.hpp"

#include <stdexcept>

#include <gtest/gtest.h>

#include "relay/telemetry/record.hpp"
#include "telemetry_test_support.hpp"

namespace relay::telemetry {
namespace {

using test::makeConfig;

TEST(LabelSpace, NodeIdsMapToConfiguredOtherOrNone) {
  const LabelSpace l(makeConfig(), {"node-b", "node-a", "", "node-a"});
  EXPECT_EQ(l.nodeIds(), (std::vector<std::string>{"node-a", "node-b"}));  // sorted, unique
  EXPECT_EQ(l.nodeCount(), 4u);  // none, node-a, node-b, other
  EXPECT_EQ(l.nodeId(""), 0u);
  EXPECT_EQ(l.nodeLabel(l.nodeId("")), "none");
  EXPECT_EQ(l.nodeLabel(l.nodeId("node-a")), "node-a");
  EXPECT_EQ(l.nodeLabel(l.nodeId("node-b")), "node-b");
  EXPECT_EQ(l.nodeId("intruder"), 3u);
  EXPECT_EQ(l.nodeLabel(3), "other");
  EXPECT_EQ(l.nodeLabel(kNone), "none");
}

TEST(LabelSpace, IdsFollowTheGatewaysConventions) {
  const LabelSpace l(makeConfig(), {});
  EXPECT_EQ(l.keys(), (std::vector<std::string>{"team-a", "team-b"}));  // config order
  EXPECT_EQ(l.upstreams(), (std::vector<std::string>{"holysheep", "moonshot"}));
  // Sorted union of every upstream's client model ids (Catalog::routes order).
  EXPECT_EQ(l.models(), (std::vector<std::string>{"kimi-k2", "kimi-k2-turbo", "moonshot-v1-8k"}));
  EXPECT_EQ(l.mcpServers(), (std::vector<std::string>{"everything"}));
  EXPECT_EQ(l.keyId("team-b"), test::kTeamB);
  EXPECT_EQ(l.modelId("moonshot-v1-8k"), test::kMoonshot8k);
  EXPECT_EQ(l.upstreamId("moonshot"), test::kMoonshotUp);
  EXPECT_EQ(l.keyId("intruder"), kNone);
  EXPECT_EQ(l.modelLabel(kNone), "none");
  EXPECT_EQ(l.modelLabel(99), "none");
}

TEST(LabelSpace, NameWinsOverAStaleId) {
  const LabelSpace l(makeConfig(), {});
  EXPECT_EQ(l.modelOf(test::kKimiK2Turbo, "kimi-k2-turbo"), test::kKimiK2Turbo);  // agree
  EXPECT_EQ(l.modelOf(test::kKimiK2, "kimi-k2-turbo"), test::kKimiK2Turbo);       // stale id
  EXPECT_EQ(l.modelOf(kNone, "kimi-k2-turbo"), test::kKimiK2Turbo);               // name only
  EXPECT_EQ(l.modelOf(test::kKimiK2, ""), test::kKimiK2);                         // id only
  EXPECT_EQ(l.modelOf(test::kKimiK2, "gpt-caller-made-this-up"), kNone);          // never a label
  EXPECT_EQ(l.modelOf(77, ""), kNone);
}

TEST(LabelSpace, RefusesMoreIdsThanTheCacheCanPack) {
  std::vector<std::string> nodes;
  for (int i = 0; i < 255; ++i)
    nodes.push_back("n" + std::to_string(i));
  EXPECT_THROW(LabelSpace(makeConfig(), nodes), std::invalid_argument);
  nodes.pop_back();
  EXPECT_NO_THROW(LabelSpace(makeConfig(), nodes));
}

TEST(StatusLabel, CodesOrNone) {
  EXPECT_EQ(statusLabel(200), "200");
  EXPECT_EQ(statusLabel(429), "429");
  EXPECT_EQ(statusLabel(599), "599");
  EXPECT_EQ(statusLabel(0), "none");
  EXPECT_EQ(statusLabel(600), "none");
  EXPECT_EQ(statusLabel(-1), "none");
}

TEST(McpMethod, FixedSetElseOther) {
  EXPECT_EQ(mcpMethodOf("tools/call"), McpMethod::kToolsCall);
  EXPECT_EQ(mcpMethodOf("initialize"), McpMethod::kInitialize);
  EXPECT_EQ(mcpMethodOf("resources/templates/list"), McpMethod::kResourcesTemplatesList);
  EXPECT_EQ(mcpMethodOf("notifications/initialized"), McpMethod::kNotification);
  EXPECT_EQ(mcpMethodOf("notifications/whatever"), McpMethod::kNotification);
  EXPECT_EQ(mcpMethodOf("tools/call2"), McpMethod::kOther);
  EXPECT_EQ(mcpMethodOf("stream_open"), McpMethod::kOther);  // relay-made names are not methods
  EXPECT_EQ(mcpMethodOf(""), McpMethod::kOther);
  EXPECT_EQ(mcpMethodLabel(McpMethod::kToolsCall), "tools/call");
  EXPECT_EQ(mcpMethodLabel(McpMethod::kSessionDelete), "session_delete");
  EXPECT_EQ(mcpMethodLabel(McpMethod::kCount), "other");
}

}  // namespace
}  // namespace relay::telemetry
