#include "relay/admission/budget_store.hpp"

#include <limits>

#include <nlohmann/json.hpp>

#include "relay/admission/atomic_file.hpp"

namespace relay::admission {
namespace {

using Json = nlohmann::json;

struct Record {
  std::string name;
  BudgetUsage usage;
};

// A reason for BudgetStateError; thrown inside parsing, caught once in load().
struct Corrupt {
  std::string reason;
};

std::uint64_t unsignedField(const Json& record, const std::string& key, const char* field) {
  const auto it = record.find(field);
  if (it == record.end()) throw Corrupt{"key '" + key + "': missing \"" + field + "\""};
  if (!it->is_number_unsigned()) {
    throw Corrupt{"key '" + key + "': \"" + field + "\" must be a non-negative integer, not " +
                  it->dump()};
  }
  return it->get<std::uint64_t>();
}

std::string stringField(const Json& record, const std::string& key, const char* field) {
  const auto it = record.find(field);
  if (it == record.end()) throw Corrupt{"key '" + key + "': missing \"" + field + "\""};
  if (!it->is_string()) {
    throw Corrupt{"key '" + key + "': \"" + field + "\" must be a string, not " + it->dump()};
  }
  return it->get<std::string>();
}

Record parseRecord(const std::string& key, const Json& record) {
  if (!record.is_object()) throw Corrupt{"key '" + key + "': record must be an object"};
  const std::string period = stringField(record, key, "period");
  const std::optional<BudgetPeriod> kind = parsePeriod(period);
  if (!kind) throw Corrupt{"key '" + key + "': unknown period \"" + period + "\""};
  const std::string startText = stringField(record, key, "period_start");
  const std::optional<WallTime> start = parseUtc(startText);
  if (!start) {
    throw Corrupt{"key '" + key + "': period_start \"" + startText +
                  "\" is not a UTC time like 2026-11-01T00:00:00Z"};
  }
  if (periodStart(*kind, *start) != *start) {
    throw Corrupt{"key '" + key + "': period_start " + startText + " does not begin a " + period};
  }
  const std::uint64_t spent = unsignedField(record, key, "spent_nano_usd");
  if (spent > static_cast<std::uint64_t>(std::numeric_limits<NanoUsd>::max())) {
    throw Corrupt{"key '" + key + "': spent_nano_usd is out of range"};
  }
  return Record{key, BudgetUsage{*start, static_cast<NanoUsd>(spent),
                                 unsignedField(record, key, "input_tokens"),
                                 unsignedField(record, key, "output_tokens")}};
}

// Validates the whole document before anything is applied.
std::vector<Record> parseDocument(const std::string& text) {
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw Corrupt{std::string("not valid JSON (") + e.what() + ")"};
  }
  if (!doc.is_object()) throw Corrupt{"the top level must be an object"};
  const auto version = doc.find("version");
  if (version == doc.end()) throw Corrupt{"missing \"version\""};
  if (!version->is_number_integer() ||
      version->get<std::int64_t>() != BudgetStore::kFormatVersion) {
    throw Corrupt{"unsupported version " + version->dump() + " (this build reads version " +
                  std::to_string(BudgetStore::kFormatVersion) + ")"};
  }
  const auto keys = doc.find("keys");
  if (keys == doc.end()) throw Corrupt{"missing \"keys\""};
  if (!keys->is_object()) throw Corrupt{"\"keys\" must be an object"};
  std::vector<Record> records;
  for (const auto& [name, record] : keys->items())
    records.push_back(parseRecord(name, record));
  return records;
}

}  // namespace

BudgetStateError::BudgetStateError(const std::string& path, const std::string& reason)
    : std::runtime_error("budget state file " + path + " cannot be used: " + reason +
                         ". Spend is never reset silently; repair the file or move it away "
                         "(which resets every key's spend) and start again."),
      path_(path),
      reason_(reason) {}

BudgetStore::BudgetStore(const std::vector<BudgetKey>& keys, std::string stateDir, WallTime now) {
  budgets_.reserve(keys.size());
  for (const BudgetKey& key : keys) {
    budgets_.push_back(std::make_shared<Budget>(key.name, key.options, now));
  }
  if (!stateDir.empty()) {
    if (stateDir.back() != '/') stateDir += '/';
    path_ = stateDir + std::string(kFileName);
  }
}

BudgetStore::BudgetStore(const std::vector<BudgetKey>& keys, std::string stateDir, WallTime now,
                         const BudgetStore& previous)
    : BudgetStore(keys, std::move(stateDir), now) {
  for (std::size_t i = 0; i < keys.size(); ++i) {
    for (const auto& old : previous.budgets_) {
      if (old->keyName() != keys[i].name) continue;
      const BudgetOptions& o = old->options();
      const BudgetOptions& n = keys[i].options;
      if (o.usd == n.usd && o.period == n.period && o.maxInputTokens == n.maxInputTokens &&
          o.maxOutputTokens == n.maxOutputTokens) {
        budgets_[i] = old;
      } else if (o.period == n.period) {
        budgets_[i]->restore(old->snapshot());
      }
      break;
    }
  }
}

Budget* BudgetStore::find(std::string_view keyName) {
  for (const auto& b : budgets_) {
    if (b->keyName() == keyName) return b.get();
  }
  return nullptr;
}

BudgetLoadReport BudgetStore::load(WallTime now) {
  BudgetLoadReport report;
  if (path_.empty()) return report;
  FileRead file = readWholeFile(path_);
  if (!file.error.empty()) throw BudgetStateError(path_, file.error);
  if (!file.found) return report;
  report.fileFound = true;

  std::vector<Record> records;
  try {
    records = parseDocument(file.contents);
  } catch (const Corrupt& c) {
    throw BudgetStateError(path_, c.reason);
  }
  for (const Record& r : records) {
    Budget* budget = find(r.name);
    if (!budget) {
      report.unknownKeys.push_back(r.name);
      continue;
    }
    // Spend counts while the period it was recorded in has not ended under
    // the key's current period kind; a later start (the clock went back) is
    // kept rather than forgotten.
    if (r.usage.periodStart >= periodStart(budget->options().period, now)) {
      budget->restore(r.usage);
      ++report.resumed;
    } else {
      ++report.rolledOver;
    }
  }
  return report;
}

std::vector<BudgetUsage> BudgetStore::snapshots() const {
  std::vector<BudgetUsage> out;
  out.reserve(budgets_.size());
  for (const auto& b : budgets_)
    out.push_back(b->snapshot());
  return out;
}

std::string BudgetStore::serialize() const {
  return serialize(snapshots());
}

std::string BudgetStore::serialize(const std::vector<BudgetUsage>& usage) const {
  Json keys = Json::object();
  for (std::size_t i = 0; i < budgets_.size(); ++i) {
    const Budget& b = *budgets_[i];
    const BudgetUsage& u = usage[i];
    keys[b.keyName()] = {
        {"period", periodName(b.options().period)},
        {"period_start", formatUtc(u.periodStart)},
        {"spent_nano_usd", static_cast<std::uint64_t>(u.spent)},
        {"spent_usd", static_cast<double>(u.spent) / 1e9},
        {"input_tokens", u.inputTokens},
        {"output_tokens", u.outputTokens},
    };
  }
  const Json doc = {{"version", kFormatVersion}, {"keys", std::move(keys)}};
  return doc.dump(2) + "\n";
}

std::optional<std::string> BudgetStore::flush() {
  if (path_.empty()) return std::nullopt;
  try {
    std::lock_guard lock(flushMutex_);
    std::vector<BudgetUsage> usage = snapshots();
    if (lastWritten_ && *lastWritten_ == usage) return std::nullopt;
    if (std::optional<std::string> error = replaceFileAtomically(path_, serialize(usage))) {
      return error;
    }
    lastWritten_ = std::move(usage);
    return std::nullopt;
  } catch (const std::exception& e) {  // allocation failure; flush must not throw
    return std::string("cannot write ") + path_ + ": " + e.what();
  }
}

}  // namespace relay::admission
