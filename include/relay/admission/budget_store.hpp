// Every key's budget, and their spend kept across restarts in
// `<state_dir>/budgets.json`.
//
// The file (format version 1) holds, per key, the current period and what was
// spent in it:
//
//   {"version": 1,
//    "keys": {"planner": {"period": "month", "period_start": "2026-11-01T00:00:00Z",
//                         "spent_nano_usd": 1234500000, "spent_usd": 1.2345,
//                         "input_tokens": 81234, "output_tokens": 20417}}}
//
// `spent_nano_usd` is authoritative; `spent_usd` is there for people reading it.
//
// load() at start: a key still configured resumes its spend when the record's
// period is still current (and the record is rolled over, i.e. dropped, when
// that period has ended); a key no longer configured is ignored. A file that
// cannot be read or parsed, or that has a wrong field anywhere, is refused with
// BudgetStateError — never silently reset, since that would hand every key a
// fresh budget.
//
// flush() writes the file by atomic replace (atomic_file.hpp). Call it every
// couple of seconds and once at shutdown, from a thread that may block (fsync
// can take milliseconds): a crash then loses at most one interval of spend and
// a clean shutdown none. It skips the write when nothing changed.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "relay/admission/budget.hpp"

namespace relay::admission {

class BudgetStateError : public std::runtime_error {
 public:
  BudgetStateError(const std::string& path, const std::string& reason);
  const std::string& path() const { return path_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string path_;
  std::string reason_;
};

struct BudgetKey {
  std::string name;
  BudgetOptions options;  // a key without caps still has its spend tracked
};

struct BudgetLoadReport {
  bool fileFound = false;
  std::size_t resumed = 0;               // records whose period is still current
  std::size_t rolledOver = 0;            // records from a period that has ended
  std::vector<std::string> unknownKeys;  // records for keys no longer configured
};

class BudgetStore {
 public:
  static constexpr int kFormatVersion = 1;
  static constexpr std::string_view kFileName = "budgets.json";

  // One budget per key, in the order given (the config's key order, so
  // `Tenant::index` finds a key's budget). `stateDir` "" keeps spend in memory.
  BudgetStore(const std::vector<BudgetKey>& keys, std::string stateDir, WallTime now);

  // For a config reload: keys whose name and options are unchanged keep their
  // Budget object from `previous` (so requests still settling against it are
  // not lost); a key whose options changed starts from its previous usage
  // when the period kind is the same. No file is read.
  BudgetStore(const std::vector<BudgetKey>& keys, std::string stateDir, WallTime now,
              const BudgetStore& previous);

  Budget& budget(std::size_t index) { return *budgets_.at(index); }
  Budget* find(std::string_view keyName);
  std::size_t size() const { return budgets_.size(); }
  const std::string& path() const { return path_; }  // "" when memory-only

  // Reads the file if there is one. Throws BudgetStateError (naming the path
  // and what is wrong) for an unreadable or corrupt file; nothing is changed
  // then.
  BudgetLoadReport load(WallTime now);

  // nullopt when written (or nothing to write); otherwise what failed, with
  // the previous file left intact. Never throws. Safe from any thread.
  std::optional<std::string> flush();

  // The file's text for the current state.
  std::string serialize() const;

 private:
  std::vector<BudgetUsage> snapshots() const;
  std::string serialize(const std::vector<BudgetUsage>& usage) const;

  std::vector<std::shared_ptr<Budget>> budgets_;  // shared with the next store on reload
  std::string path_;
  std::mutex flushMutex_;                                // one flush at a time
  std::optional<std::vector<BudgetUsage>> lastWritten_;  // guarded by flushMutex_
};

}  // namespace relay::admission
