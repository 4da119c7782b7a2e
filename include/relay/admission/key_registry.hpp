// Keys changed at runtime through the admin API, on top of the config file's.
//
// Two kinds of entry, by name:
//  - a key created by the API: its whole settings (as parseKeyJson reads them);
//  - an overlay on a file key: the fields the API changed (limits, models,
//    budget, ...; the sha256 after a rotation) and whether it is revoked.
// The effective key list is the file's keys with their overlays applied, minus
// the revoked ones, plus the API's keys: the API's last change wins over the
// file for the fields it set, and a reload of the file does not undo it
// (PATCH a field to null to give it back to the file). A rotated key keeps
// its previous secret valid for a grace period.
//
// The store lives in `<state_dir>/keys.json` (atomic replace), read at start
// and written on every change; without a state_dir changes last until the
// process ends. Thread-safe: changes come from the admin API's background
// threads, reads from reloads.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "relay/config/config.hpp"

namespace relay::admission {

// A refusal of an admin change: the HTTP status and a message saying what to fix.
struct KeyChangeError {
  int status = 400;
  std::string message;
  std::string code;  // "key_exists", "key_not_found", "invalid_key", ...
};

struct KeyChangeResult {
  std::optional<KeyChangeError> error;
  std::string secret;  // create and rotate: the new key, shown once
  std::string name;
};

struct KeyEntryInfo {
  bool fromFile = false;
  bool revoked = false;
  std::int64_t createdUnix = 0;
  std::int64_t updatedUnix = 0;
  std::vector<config::PreviousDigest> previous;  // rotation grace
};

class KeyRegistry {
 public:
  static constexpr std::string_view kFileName = "keys.json";
  static constexpr std::int64_t kDefaultGraceSeconds = 3600;

  explicit KeyRegistry(std::string stateDir);

  // Reads keys.json if there is one. Throws std::runtime_error naming the
  // file and the problem (a damaged store is never silently dropped).
  void load();

  // The effective keys for a file config (its keys merged with the store).
  // Throws config::ConfigError when an entry no longer fits the config (a
  // model or MCP server it names is gone, a name now used twice).
  std::vector<config::Key> effectiveKeys(const config::Config& fileConfig) const;

  // The changes; each validates the result against `fileConfig` before it is
  // kept. `settingsJson`: a JSON object of key fields (no sha256).
  KeyChangeResult create(const std::string& name, const std::string& settingsJson,
                         const config::Config& fileConfig);
  KeyChangeResult update(const std::string& name, const std::string& patchJson,
                         const config::Config& fileConfig);
  KeyChangeResult revoke(const std::string& name, const config::Config& fileConfig);
  KeyChangeResult rotate(const std::string& name, std::int64_t graceSeconds,
                         const config::Config& fileConfig);

  // Writes keys.json (nullopt when written, or when memory-only); else what failed.
  std::optional<std::string> flush() const;

  // Sharing between replicas (cluster): every entry, or one, as JSON text
  // (the keys.json shape, digests only, never a secret)...
  std::map<std::string, std::string> exportEntries() const;
  std::optional<std::string> exportEntry(const std::string& name) const;
  // ...and the entries of another replica taken where they are newer (the
  // later `updated` wins, then the larger text). Entries that no longer fit
  // `fileConfig` are skipped and described in `refused`. Returns the names
  // taken.
  std::vector<std::string> importEntries(const std::map<std::string, std::string>& shared,
                                         const config::Config& fileConfig,
                                         std::vector<std::string>& refused);

  // Whether entry text `a` wins over `b` (the rule importEntries applies).
  static bool newerEntry(const std::string& a, const std::string& b);

  std::optional<KeyEntryInfo> info(const std::string& name) const;
  // File keys the API revoked (they are in no snapshot, but the list shows them).
  std::vector<std::string> revokedFileKeys() const;
  bool persistent() const { return !path_.empty(); }

 private:
  struct Entry {
    bool fromFile = false;
    std::string settings;  // JSON object: API keys' settings, or a file key's overlay
    std::vector<config::PreviousDigest> previous;
    bool revoked = false;
    std::int64_t createdUnix = 0;
    std::int64_t updatedUnix = 0;
  };
  using Entries = std::map<std::string, Entry>;

  static std::vector<config::Key> merge(const Entries& entries, const config::Config& fileConfig);
  static nlohmann::json entryToJson(const Entry& e);
  static std::string entryFromJson(const std::string& name, const nlohmann::json& v, Entry& e);
  static const config::Key* fileKey(const config::Config& cfg, const std::string& name);
  static bool parseJsonBody(const std::string& text, nlohmann::json& out, KeyChangeResult& r);
  bool liveApiKey(Entries::const_iterator it) const;
  static void startOverlay(Entry& e);
  static std::int64_t laterThan(std::int64_t previous);
  void commit(Entries next, const config::Config& fileConfig, KeyChangeResult& r);

  std::string path_;
  mutable std::mutex mutex_;
  Entries entries_;
};

}  // namespace relay::admission
