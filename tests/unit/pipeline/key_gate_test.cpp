// The process-local key gate (key_gate.hpp): budget, buckets and slots
// decided together, nothing kept from a refused request, settlement once.
#include "relay/pipeline/key_gate.hpp"

#include <gtest/gtest.h>

#include "relay/config/parse.hpp"
#include "relay/pipeline/snapshot.hpp"

namespace relay::pipeline {
namespace {

constexpr std::string_view kDigest =
    "6fac8798243b010e8fa02c328f83b51b136055c8f806c34cf339cd1bf3212de3";

config::Config configWith(std::string_view keyLines) {
  std::string yaml = R"(server:
  listen: ["127.0.0.1:0"]
upstreams:
  - name: moonshot
    base_url: https://api.moonshot.ai/v1
    models: [kimi-k2]
keys:
  - name: a
    sha256: )" + std::string(kDigest) +
                     "\n" + std::string(keyLines);
  return config::parseConfig(yaml, "relay.yaml",
                             [](std::string_view) -> std::optional<std::string> { return std::nullopt; });
}

struct Fixture {
  explicit Fixture(std::string_view keyLines)
      : snapshot(configWith(keyLines), Services{&metrics}) {}
  telemetry::Metrics metrics;
  Snapshot snapshot;

  GateAsk ask(std::uint64_t tokens, admission::NanoUsd usd, bool slot = true) const {
    GateAsk a;
    a.tenant = &snapshot.keys.tenants()[0];
    a.tokens = tokens;
    a.budget.usd = usd;
    a.budget.outputTokens = tokens;
    a.holdSlot = slot;
    return a;
  }
};

TEST(LocalKeyGate, ConcurrencySlotIsHeldUntilTheTicketSettles) {
  Fixture f("    limits: {concurrency: 1}\n");
  GateResult first = LocalKeyGate::decide(f.snapshot, f.ask(10, 0));
  ASSERT_TRUE(first.ticket);
  GateResult second = LocalKeyGate::decide(f.snapshot, f.ask(10, 0));
  ASSERT_FALSE(second.ticket);
  ASSERT_TRUE(second.refusal);
  EXPECT_EQ(second.refusal->status, 429);
  EXPECT_EQ(*second.reason, telemetry::RefusalReason::kConcurrency);
  // A request that holds no slot (an MCP GET stream) still passes.
  EXPECT_TRUE(LocalKeyGate::decide(f.snapshot, f.ask(10, 0, /*slot=*/false)).ticket);
  first.ticket->settle(5, admission::BudgetAsk{}, {});
  EXPECT_TRUE(LocalKeyGate::decide(f.snapshot, f.ask(10, 0)).ticket);
}

TEST(LocalKeyGate, BudgetRefusalTakesNothingFromTheBuckets) {
  // $0.001 = 1'000'000 nano-USD.
  Fixture f("    limits: {rpm: 2}\n    budget: {usd: 0.001}\n");
  GateResult tooDear = LocalKeyGate::decide(f.snapshot, f.ask(10, 1'000'001));
  ASSERT_TRUE(tooDear.refusal);
  EXPECT_EQ(*tooDear.reason, telemetry::RefusalReason::kBudget);
  EXPECT_EQ(tooDear.refusal->code, "insufficient_quota");
  EXPECT_EQ(tooDear.refusal->headers.get("x-should-retry"), "false");
  // Both requests of the minute are still there.
  EXPECT_TRUE(LocalKeyGate::decide(f.snapshot, f.ask(10, 10)).ticket);
  EXPECT_TRUE(LocalKeyGate::decide(f.snapshot, f.ask(10, 10)).ticket);
  GateResult third = LocalKeyGate::decide(f.snapshot, f.ask(10, 10));
  ASSERT_TRUE(third.refusal);
  EXPECT_EQ(*third.reason, telemetry::RefusalReason::kRequests);
  EXPECT_EQ(third.rateHeaders.get("x-ratelimit-remaining-requests"), "0");
}

TEST(LocalKeyGate, RateRefusalReleasesTheBudgetHold) {
  Fixture f("    limits: {rpm: 1}\n    budget: {usd: 0.001}\n");
  GateResult first = LocalKeyGate::decide(f.snapshot, f.ask(10, 600'000));
  ASSERT_TRUE(first.ticket);
  // Refused by rpm: its 400'000 must not stay held against the budget.
  ASSERT_TRUE(LocalKeyGate::decide(f.snapshot, f.ask(10, 400'000)).refusal);
  EXPECT_EQ(f.snapshot.budgets->budget(0).held().usd, 600'000);
  // The hold becomes the real cost at settlement.
  first.ticket->settle(10, admission::BudgetAsk{250'000, 0, 10}, {});
  EXPECT_EQ(f.snapshot.budgets->budget(0).held().usd, 0);
  EXPECT_EQ(f.snapshot.budgets->budget(0).snapshot().spent, 250'000);
}

TEST(LocalKeyGate, SpentBudgetRefusesEvenARequestWithoutCost) {
  Fixture f("    budget: {usd: 0.001}\n");
  GateResult dear = LocalKeyGate::decide(f.snapshot, f.ask(10, 1'000'000));
  ASSERT_TRUE(dear.ticket);
  dear.ticket->settle(10, admission::BudgetAsk{1'000'000, 0, 10}, {});
  GateAsk mcp = f.ask(0, 0);
  mcp.refuseWhenSpent = true;
  GateResult refused = LocalKeyGate::decide(f.snapshot, mcp);
  ASSERT_TRUE(refused.refusal);
  EXPECT_EQ(*refused.reason, telemetry::RefusalReason::kBudget);
}

TEST(LocalKeyGate, ADroppedTicketChargesTheTokensUsedSoFar) {
  Fixture f("    limits: {tpm: 100}\n");
  {
    GateResult r = LocalKeyGate::decide(f.snapshot, f.ask(100, 0));
    ASSERT_TRUE(r.ticket);
    r.ticket->setUsedSoFar(30, admission::BudgetAsk{});
  }
  // 70 of the 100 reserved came back.
  EXPECT_TRUE(LocalKeyGate::decide(f.snapshot, f.ask(70, 0)).ticket);
  EXPECT_TRUE(LocalKeyGate::decide(f.snapshot, f.ask(1, 0)).refusal);
}

}  // namespace
}  // namespace relay::pipeline
