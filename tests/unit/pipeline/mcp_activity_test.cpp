// Idle MCP sessions (mcp_activity.hpp), with explicit times: no clock, no sleep.
#include "relay/pipeline/mcp_activity.hpp"

#include <gtest/gtest.h>

namespace relay::pipeline {
namespace {

McpSession session(std::string upstreamId) {
  return McpSession{0, 0, "planner", std::move(upstreamId), "2025-06-18"};
}

TEST(McpActivity, ASessionIdleLongerThanTheLimitHasExpired) {
  McpActivity table;
  EXPECT_EQ(table.touch("a", session("up-a"), 0, 1000), McpActivity::Touch::kFresh);
  EXPECT_EQ(table.touch("a", session("up-a"), 1000, 1000), McpActivity::Touch::kActive);  // at the edge
  EXPECT_EQ(table.touch("a", session("up-a"), 2001, 1000), McpActivity::Touch::kExpired);  // one ms more
  // Forgotten once expired: its next use starts it again (the caller has been told).
  EXPECT_EQ(table.touch("a", session("up-a"), 2002, 1000), McpActivity::Touch::kFresh);
}

TEST(McpActivity, TheSweeperTakesTheIdleOnesOldestFirstAndRemembersThemAsEnded) {
  McpActivity table;
  table.touch("old", session("up-old"), 0, 1000);
  table.touch("mid", session("up-mid"), 500, 1000);
  table.touch("new", session("up-new"), 1500, 1000);
  std::vector<McpSession> gone = table.takeExpired(1600, 1000, 10);
  ASSERT_EQ(gone.size(), 2u);
  EXPECT_EQ(gone[0].upstreamId, "up-old");
  EXPECT_EQ(gone[1].upstreamId, "up-mid");
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.touch("old", session("up-old"), 1700, 1000), McpActivity::Touch::kEnded);
  EXPECT_EQ(table.touch("new", session("up-new"), 1700, 1000), McpActivity::Touch::kActive);
}

TEST(McpActivity, AtMostMaxSessionsAreTrackedTheLeastRecentlyUsedGoesFirst) {
  McpActivity table(3);
  table.touch("a", session("1"), 0, 1000);
  table.touch("b", session("2"), 1, 1000);
  table.touch("c", session("3"), 2, 1000);
  table.touch("a", session("1"), 3, 1000);  // a is now the most recent
  table.touch("d", session("4"), 4, 1000);  // b goes
  EXPECT_EQ(table.size(), 3u);
  EXPECT_EQ(table.touch("b", session("2"), 5, 1000), McpActivity::Touch::kFresh);
  EXPECT_EQ(table.touch("a", session("1"), 5, 1000), McpActivity::Touch::kActive);
}

TEST(McpActivity, ADeletedSessionIsForgotten) {
  McpActivity table;
  table.touch("a", session("1"), 0, 1000);
  table.forget("a");
  EXPECT_EQ(table.size(), 0u);
  EXPECT_TRUE(table.takeExpired(10'000, 1000, 10).empty());
}

}  // namespace
}  // namespace relay::pipeline
