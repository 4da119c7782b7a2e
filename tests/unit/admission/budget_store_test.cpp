// Spend that survives restarts: round trip, roll-over at load, refusal of a
// corrupt file, and atomic replacement that never leaves a partial file.
#include "relay/admission/budget_store.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/resource.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace relay::admission {
namespace {

namespace fs = std::filesystem;

WallTime utc(std::string_view text) {
  return parseUtc(text).value();
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "budget-store-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_))
      out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  fs::path path_;
};

std::string readText(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeText(const fs::path& p, std::string_view text) {
  std::ofstream out(p, std::ios::trunc);
  out << text;
}

const WallTime kNov = utc("2026-11-15T10:00:00Z");

std::vector<BudgetKey> twoKeys() {
  return {BudgetKey{"planner", BudgetOptions{.usd = 12.0, .period = BudgetPeriod::kMonth}},
          BudgetKey{"agent", BudgetOptions{.period = BudgetPeriod::kDay, .maxInputTokens = 10}}};
}

TEST(BudgetStore, SpendSurvivesARestart) {
  TempDir dir;
  {
    BudgetStore store(twoKeys(), dir.path().string(), kNov);
    EXPECT_FALSE(store.load(kNov).fileFound);
    store.budget(0).recordNanoUsd(toNanoUsd(1.2345), 1'000, 200, kNov);
    store.find("agent")->recordNanoUsd(toNanoUsd(0.5), 7, 3, kNov);
    EXPECT_EQ(store.flush(), std::nullopt);
  }
  EXPECT_EQ(dir.names(), std::vector<std::string>{"budgets.json"});  // no temp left behind
  const nlohmann::json doc = nlohmann::json::parse(readText(dir.path() / "budgets.json"));
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["keys"]["planner"]["spent_nano_usd"], 1'234'500'000);
  EXPECT_EQ(doc["keys"]["planner"]["period_start"], "2026-11-01T00:00:00Z");
  EXPECT_EQ(doc["keys"]["agent"]["period"], "day");

  BudgetStore restarted(twoKeys(), dir.path().string(), kNov + std::chrono::hours(1));
  const BudgetLoadReport report = restarted.load(kNov + std::chrono::hours(1));
  EXPECT_TRUE(report.fileFound);
  EXPECT_EQ(report.resumed, 2u);
  EXPECT_EQ(report.rolledOver, 0u);
  const BudgetUsage planner = restarted.budget(0).usage(kNov);
  EXPECT_EQ(planner.spent, 1'234'500'000);
  EXPECT_EQ(planner.inputTokens, 1'000u);
  EXPECT_EQ(planner.outputTokens, 200u);
  EXPECT_EQ(restarted.budget(1).usage(kNov).inputTokens, 7u);
  restarted.budget(1).recordNanoUsd(toNanoUsd(0), 3, 0, kNov);
  EXPECT_TRUE(restarted.budget(1).check(kNov));  // resumed spend counts toward the cap
}

TEST(BudgetStore, OldPeriodsRollOverAndRemovedKeysAreIgnored) {
  TempDir dir;
  {
    BudgetStore store({BudgetKey{"planner", {.usd = 12.0}}, BudgetKey{"gone", {}},
                       BudgetKey{"forever", {.period = BudgetPeriod::kTotal}},
                       BudgetKey{"agent", {.period = BudgetPeriod::kDay}}},
                      dir.path().string(), kNov);
    for (std::size_t i = 0; i < store.size(); ++i)
      store.budget(i).recordNanoUsd(toNanoUsd(1.0), 1, 1, kNov);
    ASSERT_EQ(store.flush(), std::nullopt);
  }
  const WallTime december = utc("2026-12-01T00:00:05Z");
  BudgetStore store({BudgetKey{"agent", {.period = BudgetPeriod::kDay}},
                     BudgetKey{"forever", {.period = BudgetPeriod::kTotal}},
                     BudgetKey{"planner", {.usd = 12.0}}, BudgetKey{"new", {}}},
                    dir.path().string(), december);
  const BudgetLoadReport report = store.load(december);
  EXPECT_EQ(report.resumed, 1u);     // forever
  EXPECT_EQ(report.rolledOver, 2u);  // agent's day and planner's month have ended
  EXPECT_EQ(report.unknownKeys, std::vector<std::string>{"gone"});
  EXPECT_EQ(store.find("forever")->usage(december).spent, 1'000'000'000);
  EXPECT_EQ(store.find("planner")->usage(december).spent, 0);
  EXPECT_EQ(store.find("planner")->usage(december).periodStart, utc("2026-12-01T00:00:00Z"));
  EXPECT_EQ(store.find("agent")->usage(december).spent, 0);
  EXPECT_EQ(store.find("new")->usage(december).spent, 0);
  ASSERT_EQ(store.flush(), std::nullopt);
  const nlohmann::json doc = nlohmann::json::parse(readText(dir.path() / "budgets.json"));
  EXPECT_FALSE(doc["keys"].contains("gone"));
  EXPECT_EQ(doc["keys"]["planner"]["period_start"], "2026-12-01T00:00:00Z");
}

TEST(BudgetStore, MemoryOnlyWithoutAStateDir) {
  BudgetStore store(twoKeys(), "", kNov);
  EXPECT_EQ(store.path(), "");
  EXPECT_FALSE(store.load(kNov).fileFound);
  store.budget(0).recordNanoUsd(toNanoUsd(1.0), 0, 0, kNov);
  EXPECT_EQ(store.flush(), std::nullopt);
}

// Each of these must be refused, never treated as "no spend".
const char* const kCorruptFiles[] = {
    "",
    "{",
    "[]",
    "null",
    R"({"keys": {}})",
    R"({"version": 2, "keys": {}})",
    R"({"version": "1", "keys": {}})",
    R"({"version": 1})",
    R"({"version": 1, "keys": []})",
    R"({"version": 1, "keys": {"planner": 5}})",
    R"({"version": 1, "keys": {"planner": {"period": "month", "period_start": "2026-11-01T00:00:00Z", "input_tokens": 0, "output_tokens": 0}}})",
    R"({"version": 1, "keys": {"planner": {"period": "month", "period_start": "2026-11-01T00:00:00Z", "spent_nano_usd": -5, "input_tokens": 0, "output_tokens": 0}}})",
    R"({"version": 1, "keys": {"planner": {"period": "month", "period_start": "2026-11-01T00:00:00Z", "spent_nano_usd": 1.5, "input_tokens": 0, "output_tokens": 0}}})",
    R"({"version": 1, "keys": {"planner": {"period": "month", "period_start": "2026-11-01T00:00:00Z", "spent_nano_usd": 5, "input_tokens": "7", "output_tokens": 0}}})",
    R"({"version": 1, "keys": {"planner": {"period": "week", "period_start": "2026-11-01T00:00:00Z", "spent_nano_usd": 5, "input_tokens": 0, "output_tokens": 0}}})",
    R"({"version": 1, "keys": {"planner": {"period": "month", "period_start": "yesterday", "spent_nano_usd": 5, "input_tokens": 0, "output_tokens": 0}}})",
    R"({"version": 1, "keys": {"planner": {"period": "month", "period_start": "2026-11-02T00:00:00Z", "spent_nano_usd": 5, "input_tokens": 0, "output_tokens": 0}}})",
    R"({"version": 1, "keys": {"planner": {"period": "month", "period_start": "2026-11-01T00:00:00Z", "spent_nano_usd": 18446744073709551615, "input_tokens": 0, "output_tokens": 0}}})",
    // A bad record of a key no longer configured still means the file is damaged.
    R"({"version": 1, "keys": {"planner": {"period": "month", "period_start": "2026-11-01T00:00:00Z", "spent_nano_usd": 5, "input_tokens": 0, "output_tokens": 0}, "gone": {}}})",
};

TEST(BudgetStore, ACorruptFileIsRefusedWithThePathAndTheReason) {
  TempDir dir;
  const fs::path file = dir.path() / "budgets.json";
  for (const char* text : kCorruptFiles) {
    writeText(file, text);
    BudgetStore store(twoKeys(), dir.path().string(), kNov);
    store.budget(0).recordNanoUsd(toNanoUsd(2.0), 0, 0, kNov);
    try {
      store.load(kNov);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const BudgetStateError& e) {
      EXPECT_EQ(e.path(), file.string());
      EXPECT_FALSE(e.reason().empty());
      EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos);
      EXPECT_NE(std::string(e.what()).find(e.reason()), std::string::npos);
    }
    EXPECT_EQ(store.budget(0).usage(kNov).spent, 2'000'000'000) << text;  // nothing applied
    EXPECT_EQ(readText(file), text);  // and the file is left for someone to look at
  }
}

TEST(BudgetStore, RefusalReasonsSaySpecificallyWhatIsWrong) {
  TempDir dir;
  const fs::path file = dir.path() / "budgets.json";
  auto reasonFor = [&](std::string_view text) {
    writeText(file, text);
    BudgetStore store(twoKeys(), dir.path().string(), kNov);
    try {
      store.load(kNov);
    } catch (const BudgetStateError& e) {
      return e.reason();
    }
    return std::string("<accepted>");
  };
  EXPECT_NE(reasonFor("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(reasonFor(R"({"version": 2, "keys": {}})").find("unsupported version 2"),
            std::string::npos);
  EXPECT_EQ(reasonFor(kCorruptFiles[11]),
            "key 'planner': \"spent_nano_usd\" must be a non-negative integer, not -5");
}

TEST(BudgetStore, AnUnreadableFileIsRefusedToo) {
  TempDir dir;
  fs::create_directory(dir.path() / "budgets.json");  // exists, but cannot be read as a file
  BudgetStore store(twoKeys(), dir.path().string(), kNov);
  EXPECT_THROW(store.load(kNov), BudgetStateError);
}

// A write that fails part-way (here: the file-size limit, standing in for a
// full disk) must leave the previous file exactly as it was and no temp file.
TEST(BudgetStore, AFailedWriteLeavesThePreviousFileIntact) {
  TempDir dir;
  const fs::path file = dir.path() / "budgets.json";
  BudgetStore store(twoKeys(), dir.path().string(), kNov);
  store.budget(0).recordNanoUsd(toNanoUsd(1.0), 1, 1, kNov);
  ASSERT_EQ(store.flush(), std::nullopt);
  const std::string before = readText(file);

  store.budget(0).recordNanoUsd(toNanoUsd(1.0), 1, 1, kNov);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit tiny = saved;
  tiny.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tiny), 0);
  const std::optional<std::string> error = store.flush();
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, oldHandler);

  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("budgets.json.tmp"), std::string::npos) << *error;
  EXPECT_EQ(readText(file), before);
  EXPECT_EQ(dir.names(), std::vector<std::string>{"budgets.json"});

  // The unsaved spend is written by the next successful flush.
  ASSERT_EQ(store.flush(), std::nullopt);
  EXPECT_NE(readText(file), before);
  EXPECT_EQ(nlohmann::json::parse(readText(file))["keys"]["planner"]["spent_nano_usd"],
            2'000'000'000);
}

TEST(BudgetStore, AFailedRenameRemovesTheTempFile) {
  TempDir dir;
  fs::create_directories(dir.path() / "budgets.json" / "occupied");
  BudgetStore store(twoKeys(), dir.path().string(), kNov);
  const std::optional<std::string> error = store.flush();
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("cannot rename"), std::string::npos) << *error;
  EXPECT_EQ(dir.names(), std::vector<std::string>{"budgets.json"});
}

TEST(BudgetStore, FlushWritesOnlyWhenSomethingChanged) {
  TempDir dir;
  const fs::path file = dir.path() / "budgets.json";
  BudgetStore store(twoKeys(), dir.path().string(), kNov);
  ASSERT_EQ(store.flush(), std::nullopt);  // the first flush always writes
  ASSERT_TRUE(fs::exists(file));
  fs::remove(file);
  ASSERT_EQ(store.flush(), std::nullopt);
  EXPECT_FALSE(fs::exists(file));  // nothing new: no write
  store.budget(1).recordNanoUsd(toNanoUsd(0), 1, 0, kNov);
  ASSERT_EQ(store.flush(), std::nullopt);
  EXPECT_TRUE(fs::exists(file));
}

TEST(BudgetStore, AStateDirThatDoesNotExistIsAFlushError) {
  BudgetStore store(twoKeys(), "/nonexistent-budget-dir/sub", kNov);
  EXPECT_FALSE(store.load(kNov).fileFound);
  const std::optional<std::string> error = store.flush();
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("/nonexistent-budget-dir/sub/budgets.json.tmp"), std::string::npos);
}

}  // namespace
}  // namespace relay::admission
