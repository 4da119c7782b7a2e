// Budgets per key and UTC period: checks, records, messages and roll-over.
#include "relay/admission/budget.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

namespace relay::admission {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

WallTime utc(std::string_view text) {
  const std::optional<WallTime> t = parseUtc(text);
  EXPECT_TRUE(t.has_value()) << text;
  return t.value_or(WallTime{});
}

TEST(BudgetPeriod, BoundariesAreUtcCalendarDaysAndMonths) {
  const WallTime t = utc("2026-11-15T13:45:10Z");
  EXPECT_EQ(formatUtc(periodStart(BudgetPeriod::kDay, t)), "2026-11-15T00:00:00Z");
  EXPECT_EQ(formatUtc(periodStart(BudgetPeriod::kMonth, t)), "2026-11-01T00:00:00Z");
  EXPECT_EQ(periodStart(BudgetPeriod::kTotal, t), WallTime{});
  EXPECT_EQ(formatUtc(*periodEnd(BudgetPeriod::kDay, utc("2026-11-15T00:00:00Z"))),
            "2026-11-16T00:00:00Z");
  EXPECT_EQ(formatUtc(*periodEnd(BudgetPeriod::kMonth, utc("2026-12-01T00:00:00Z"))),
            "2027-01-01T00:00:00Z");
  EXPECT_EQ(formatUtc(*periodEnd(BudgetPeriod::kMonth, utc("2028-02-01T00:00:00Z"))),
            "2028-03-01T00:00:00Z");
  EXPECT_EQ(formatUtc(*periodEnd(BudgetPeriod::kDay, utc("2028-02-28T00:00:00Z"))),
            "2028-02-29T00:00:00Z");  // leap day
  EXPECT_FALSE(periodEnd(BudgetPeriod::kTotal, WallTime{}).has_value());
  // Sub-second precision does not move a boundary.
  EXPECT_EQ(formatUtc(periodStart(BudgetPeriod::kDay,
                                  utc("2026-11-15T23:59:59Z") + std::chrono::milliseconds(999))),
            "2026-11-15T00:00:00Z");
}

TEST(BudgetPeriod, UtcTextIsStrict) {
  EXPECT_EQ(formatUtc(utc("2026-02-28T23:59:59Z")), "2026-02-28T23:59:59Z");
  EXPECT_FALSE(parseUtc("2026-02-29T00:00:00Z"));  // not a leap year
  EXPECT_FALSE(parseUtc("2026-13-01T00:00:00Z"));
  EXPECT_FALSE(parseUtc("2026-11-01 00:00:00Z"));
  EXPECT_FALSE(parseUtc("2026-11-01T00:00:00"));
  EXPECT_FALSE(parseUtc("2026-11-01T24:00:00Z"));
  EXPECT_FALSE(parseUtc("2026-11-0xT00:00:00Z"));
  EXPECT_FALSE(parseUtc(""));
}

TEST(Budget, MoneyIsCountedInNanoDollarsWithoutDrift) {
  EXPECT_EQ(toNanoUsd(12.0), 12'000'000'000);
  EXPECT_EQ(toNanoUsd(0.000015), 15'000);  // 100 tokens at $0.15 per million
  EXPECT_EQ(toNanoUsd(-1.0), 0);
  EXPECT_EQ(toNanoUsd(std::nan("")), 0);
  EXPECT_EQ(formatUsd(12'000'000'000), "$12.00");
  EXPECT_EQ(formatUsd(5'000'000), "$0.005");
  EXPECT_EQ(formatUsd(1'234'500'000), "$1.2345");
  EXPECT_EQ(formatUsd(0), "$0.00");

  Budget budget("planner", BudgetOptions{.usd = 1.0}, utc("2026-11-15T00:00:00Z"));
  for (int i = 0; i < 100'000; ++i)
    budget.recordNanoUsd(toNanoUsd(0.00001), 0, 0, utc("2026-11-15T00:00:00Z"));
  EXPECT_EQ(budget.usage(utc("2026-11-15T00:00:00Z")).spent, 1'000'000'000);  // exactly $1
}

TEST(Budget, RefusesOnceSpentAndNamesTheBudgetAndTheReset) {
  const WallTime t = utc("2026-11-20T08:00:00Z");
  Budget budget("planner", BudgetOptions{.usd = 12.0, .period = BudgetPeriod::kMonth}, t);
  EXPECT_FALSE(budget.check(t));
  budget.recordNanoUsd(toNanoUsd(11.99), 100, 10, t);
  EXPECT_FALSE(budget.check(t));
  budget.recordNanoUsd(toNanoUsd(0.01), 100, 10, t);
  const std::optional<BudgetRefusal> refusal = budget.check(t);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->limit, BudgetLimit::kUsd);
  EXPECT_EQ(refusal->message,
            "key 'planner' has spent its monthly budget of $12.00; it resets at "
            "2026-12-01T00:00:00Z");
  EXPECT_EQ(refusal->resetsAt, utc("2026-12-01T00:00:00Z"));
}

TEST(Budget, TokenCapsAndATotalBudgetThatNeverResets) {
  const WallTime t = utc("2026-11-20T08:00:00Z");
  Budget daily(
      "agent",
      BudgetOptions{.period = BudgetPeriod::kDay, .maxInputTokens = 1'000, .maxOutputTokens = 500},
      t);
  daily.recordNanoUsd(toNanoUsd(0), 400, 500, t);
  std::optional<BudgetRefusal> r = daily.check(t);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->limit, BudgetLimit::kOutputTokens);
  EXPECT_EQ(r->message,
            "key 'agent' has used its daily output-token budget of 500 tokens; it resets at "
            "2026-11-21T00:00:00Z");
  daily.recordNanoUsd(toNanoUsd(0), 600, 0, t);
  r = daily.check(t);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->limit, BudgetLimit::kInputTokens);

  Budget total("once", BudgetOptions{.usd = 5.0, .period = BudgetPeriod::kTotal}, t);
  total.recordNanoUsd(toNanoUsd(5.0), 0, 0, t);
  r = total.check(t + hours(24 * 400));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->message, "key 'once' has spent its total budget of $5.00; it does not reset");
  EXPECT_FALSE(r->resetsAt);
}

TEST(Budget, MonthRollsOverAtMidnightUtcOnTheFirst) {
  const WallTime lastSecond = utc("2026-11-30T23:59:59Z");
  Budget budget("planner", BudgetOptions{.usd = 1.0}, utc("2026-11-03T00:00:00Z"));
  budget.recordNanoUsd(toNanoUsd(1.5), 10, 20, lastSecond);
  EXPECT_TRUE(budget.check(lastSecond + std::chrono::milliseconds(999)));
  const WallTime december = utc("2026-12-01T00:00:00Z");
  EXPECT_FALSE(budget.check(december));
  const BudgetUsage u = budget.usage(december);
  EXPECT_EQ(u.periodStart, december);
  EXPECT_EQ(u.spent, 0);
  EXPECT_EQ(u.inputTokens, 0u);
  EXPECT_EQ(u.outputTokens, 0u);
  // And across the year end.
  budget.recordNanoUsd(toNanoUsd(2.0), 0, 0, utc("2026-12-31T23:00:00Z"));
  const std::optional<BudgetRefusal> r = budget.check(utc("2026-12-31T23:00:00Z"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->resetsAt, utc("2027-01-01T00:00:00Z"));
  EXPECT_FALSE(budget.check(utc("2027-01-01T00:00:00Z")));
}

TEST(Budget, DayRollsOverAndARecordAfterTheBoundaryCountsInTheNewDay) {
  const WallTime evening = utc("2026-03-10T23:30:00Z");
  Budget budget("agent", BudgetOptions{.period = BudgetPeriod::kDay, .maxInputTokens = 100},
                evening);
  budget.recordNanoUsd(toNanoUsd(0), 100, 0, evening);
  EXPECT_TRUE(budget.check(evening));
  // No check in between: the first thing after midnight is a record.
  const WallTime morning = utc("2026-03-11T00:00:01Z");
  budget.recordNanoUsd(toNanoUsd(0), 40, 0, morning);
  const BudgetUsage u = budget.usage(morning);
  EXPECT_EQ(u.periodStart, utc("2026-03-11T00:00:00Z"));
  EXPECT_EQ(u.inputTokens, 40u);
  EXPECT_FALSE(budget.check(morning));
}

TEST(Budget, ConcurrentRecordsAreAllCounted) {
  const WallTime t = utc("2026-05-05T05:05:05Z");
  Budget budget("hot", BudgetOptions{}, t);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 50'000; ++j)
        budget.recordNanoUsd(3, 2, 1, t);
    });
  }
  for (auto& th : threads)
    th.join();
  const BudgetUsage u = budget.usage(t);
  EXPECT_EQ(u.spent, 600'000);
  EXPECT_EQ(u.inputTokens, 400'000u);
  EXPECT_EQ(u.outputTokens, 200'000u);
}

TEST(Budget, ConcurrentRollOverHappensOnce) {
  Budget budget("hot", BudgetOptions{.period = BudgetPeriod::kDay}, utc("2026-05-05T10:00:00Z"));
  budget.recordNanoUsd(1'000, 0, 0, utc("2026-05-05T10:00:00Z"));
  const WallTime next = utc("2026-05-06T00:00:00Z");
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 10'000; ++j)
        budget.recordNanoUsd(1, 0, 0, next + seconds(j % 7));
    });
  }
  for (auto& th : threads)
    th.join();
  // Every record of the new day survives: the roll-over reset ran before them.
  EXPECT_EQ(budget.usage(next).spent, 40'000);
}

// Reservations: the worst case is held against the cap at admission, the real
// cost replaces it at settlement.
TEST(BudgetHold, AReservationThatDoesNotFitIsRefusedWithWhatIsLeft) {
  const WallTime t = utc("2026-11-15T10:00:00Z");
  Budget budget("planner", BudgetOptions{.usd = 0.045, .period = BudgetPeriod::kMonth}, t);
  const BudgetAsk worst{toNanoUsd(0.0172), 100, 172};
  auto a = budget.reserve(worst, t);
  auto b = budget.reserve(worst, t);
  ASSERT_TRUE(std::holds_alternative<BudgetHold>(a));
  ASSERT_TRUE(std::holds_alternative<BudgetHold>(b));
  auto c = budget.reserve(worst, t);  // 0.0344 held: 0.0106 left < 0.0172
  ASSERT_TRUE(std::holds_alternative<BudgetRefusal>(c));
  const BudgetRefusal& r = std::get<BudgetRefusal>(c);
  EXPECT_EQ(r.limit, BudgetLimit::kUsd);
  EXPECT_NE(r.message.find("$0.0106 left"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("$0.0172"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("resets at 2026-12-01T00:00:00Z"), std::string::npos) << r.message;
  EXPECT_EQ(budget.held().usd, 2 * toNanoUsd(0.0172));

  // Settling to the real cost frees the difference at once.
  std::get<BudgetHold>(a).settle(BudgetAsk{toNanoUsd(0.002), 100, 20}, t);
  EXPECT_EQ(budget.usage(t).spent, toNanoUsd(0.002));
  EXPECT_EQ(budget.held().usd, toNanoUsd(0.0172));
  auto d = budget.reserve(worst, t);  // fits again
  ASSERT_TRUE(std::holds_alternative<BudgetHold>(d));
  std::get<BudgetHold>(d).settle(BudgetAsk{}, t);  // a request that cost nothing
  EXPECT_EQ(budget.usage(t).spent, toNanoUsd(0.002));
  EXPECT_EQ(budget.held().usd, toNanoUsd(0.0172));
}

TEST(BudgetHold, DroppedUnsettledItChargesWhatWasUsedSoFar) {
  // A dropped hold settles at the wall clock's now: use a budget that never rolls over.
  const WallTime t = utc("2026-11-15T10:00:00Z");
  Budget budget("k", BudgetOptions{.period = BudgetPeriod::kTotal, .maxOutputTokens = 100}, t);
  {
    auto h = budget.reserve(BudgetAsk{0, 0, 60}, t);
    ASSERT_TRUE(std::holds_alternative<BudgetHold>(h));
    std::get<BudgetHold>(h).setUsedSoFar(BudgetAsk{0, 0, 7});
  }
  EXPECT_EQ(budget.usage(t).outputTokens, 7u);
  EXPECT_EQ(budget.held().outputTokens, 0u);
}

// However many threads reserve at once, what is held never passes the cap,
// and the spend equals exactly the settled costs.
TEST(BudgetHold, AHardCeilingUnderParallelReservations) {
  const WallTime t = utc("2026-11-15T10:00:00Z");
  Budget budget("swarm", BudgetOptions{.usd = 1.0, .period = BudgetPeriod::kTotal}, t);
  constexpr int kThreads = 8;
  constexpr int kEach = 2000;
  std::atomic<NanoUsd> settled{0};
  std::atomic<bool> overdrawn{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < kEach; ++n) {
        auto h = budget.reserve(BudgetAsk{toNanoUsd(0.01), 0, 0}, t);
        // Spent first, then held: a settle between the two reads moves money
        // from held to spent, so this order can only under-count. (Held first
        // counted a settle in both and reported an overdraw that never was:
        // seen under ASan's timing.)
        const NanoUsd spent = budget.usage(t).spent;
        if (spent + budget.held().usd > toNanoUsd(1.0)) overdrawn = true;
        if (auto* hold = std::get_if<BudgetHold>(&h)) {
          NanoUsd cost = (n + i) % 3 == 0 ? toNanoUsd(0.01) : toNanoUsd(0.001);
          hold->settle(BudgetAsk{cost, 0, 0}, t);
          settled += cost;
        }
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_FALSE(overdrawn.load());
  EXPECT_EQ(budget.usage(t).spent, settled.load());
  EXPECT_LE(budget.usage(t).spent, toNanoUsd(1.0));
  EXPECT_GE(budget.usage(t).spent,
            toNanoUsd(0.99));  // it was used up to the cap, not stopped early
  EXPECT_EQ(budget.held().usd, 0);
}

// A request held in one period and settled in the next counts in the next;
// the old period's spend does not.
TEST(BudgetHold, HoldsSurviveTheRollOverIntoTheNewPeriod) {
  const WallTime nov = utc("2026-11-30T23:59:59Z");
  const WallTime dec = utc("2026-12-01T00:00:01Z");
  Budget budget("k", BudgetOptions{.period = BudgetPeriod::kMonth, .maxOutputTokens = 100}, nov);
  budget.recordNanoUsd(0, 0, 90, nov);
  auto h = budget.reserve(BudgetAsk{0, 0, 10}, nov);
  ASSERT_TRUE(std::holds_alternative<BudgetHold>(h));
  EXPECT_TRUE(std::holds_alternative<BudgetRefusal>(budget.reserve(BudgetAsk{0, 0, 1}, nov)));
  // December: the 90 are gone, the 10 held are still held.
  EXPECT_EQ(budget.usage(dec).outputTokens, 0u);
  EXPECT_EQ(budget.held().outputTokens, 10u);
  EXPECT_TRUE(std::holds_alternative<BudgetRefusal>(budget.reserve(BudgetAsk{0, 0, 91}, dec)));
  std::get<BudgetHold>(h).settle(BudgetAsk{0, 0, 4}, dec);
  EXPECT_EQ(budget.usage(dec).outputTokens, 4u);
  EXPECT_EQ(budget.held().outputTokens, 0u);
  EXPECT_TRUE(std::holds_alternative<BudgetHold>(budget.reserve(BudgetAsk{0, 0, 96}, dec)));
}

}  // namespace
}  // namespace relay::admission
