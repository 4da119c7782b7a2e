#include "relay/admission/key_registry.hpp"

#include <algorithm>
#include <chrono>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "relay/admission/atomic_file.hpp"
#include "relay/admission/key_store.hpp"
#include "relay/config/parse.hpp"

namespace relay::admission {
namespace {

using nlohmann::json;

std::int64_t nowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The fields a change may set; name and sha256 belong to the gateway.
constexpr std::string_view kSettable[] = {"models", "limits", "budget", "mcp_servers", "mcp_tools"};

bool settable(const std::string& field) {
  return std::find(std::begin(kSettable), std::end(kSettable), field) != std::end(kSettable);
}

// Applies `patch` to `base` (top-level fields replace; null removes).
void applyPatch(json& base, const json& patch) {
  for (const auto& [field, value] : patch.items()) {
    if (value.is_null()) {
      base.erase(field);
    } else {
      base[field] = value;
    }
  }
}

std::optional<KeyChangeError> checkPatch(const json& patch) {
  if (!patch.is_object()) {
    return KeyChangeError{400, "the body must be a JSON object of key settings", "invalid_key"};
  }
  for (const auto& [field, value] : patch.items()) {
    if (!settable(field)) {
      return KeyChangeError{400,
                            "'" + field +
                                "' cannot be set; settable fields are models, limits, budget, "
                                "mcp_servers and mcp_tools",
                            "invalid_key"};
    }
  }
  return std::nullopt;
}

std::vector<config::PreviousDigest> unexpired(const std::vector<config::PreviousDigest>& all) {
  std::vector<config::PreviousDigest> out;
  const std::int64_t now = nowUnix();
  for (const auto& p : all) {
    if (p.untilUnix > now) out.push_back(p);
  }
  return out;
}

}  // namespace

KeyRegistry::KeyRegistry(std::string stateDir) {
  if (!stateDir.empty()) path_ = stateDir + "/" + std::string(kFileName);
}

const config::Key* KeyRegistry::fileKey(const config::Config& cfg, const std::string& name) {
  for (const config::Key& k : cfg.keys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::vector<config::Key> KeyRegistry::merge(const Entries& entries,
                                            const config::Config& fileConfig) {
  std::vector<config::Key> out;
  std::set<std::string> names;
  std::set<std::string> digests;
  auto add = [&](config::Key k) {
    if (!names.insert(k.name).second) {
      throw config::ConfigError("runtime key '" + k.name + "': the name is also a key of " +
                                fileConfig.sourcePath + "; rename or revoke one of them");
    }
    if (!digests.insert(k.sha256).second) {
      throw config::ConfigError("runtime key '" + k.name + "': its digest is another key's");
    }
    out.push_back(std::move(k));
  };
  for (const config::Key& file : fileConfig.keys) {
    auto it = entries.find(file.name);
    if (it == entries.end() || !it->second.fromFile) {
      add(file);
      continue;
    }
    const Entry& e = it->second;
    if (e.revoked) continue;
    json merged = json::parse(config::keyToJson(file));
    applyPatch(merged, json::parse(e.settings));
    config::Key k = config::parseKeyJson(merged.dump(), fileConfig, "keys.json[" + file.name + "]");
    k.previousDigests = unexpired(e.previous);
    add(std::move(k));
  }
  for (const auto& [name, e] : entries) {
    if (e.fromFile || e.revoked) continue;
    config::Key k = config::parseKeyJson(e.settings, fileConfig, "keys.json[" + name + "]");
    k.previousDigests = unexpired(e.previous);
    add(std::move(k));
  }
  return out;
}

std::vector<config::Key> KeyRegistry::effectiveKeys(const config::Config& fileConfig) const {
  std::lock_guard lock(mutex_);
  return merge(entries_, fileConfig);
}

// The steps every change shares.

bool KeyRegistry::parseJsonBody(const std::string& text, json& out, KeyChangeResult& r) {
  out = json::parse(text, nullptr, false);
  if (!out.is_discarded()) return true;
  r.error = KeyChangeError{400, "the body is not valid JSON", "invalid_json"};
  return false;
}

// An API key (not a file key's overlay) that exists and is not revoked.
bool KeyRegistry::liveApiKey(Entries::const_iterator it) const {
  return it != entries_.end() && !it->second.fromFile && !it->second.revoked;
}

// The first change to a file key: an empty overlay over the file's settings.
void KeyRegistry::startOverlay(Entry& e) {
  e.fromFile = true;
  e.settings = "{}";
  e.createdUnix = nowUnix();
}

// Strictly later than `previous` (replicas order changes by it).
std::int64_t KeyRegistry::laterThan(std::int64_t previous) {
  return std::max(nowUnix(), previous + 1);
}

// The changed entries replace the current ones if they still make a valid
// set of keys (names, models, limits, budget); otherwise r says why and no
// secret is handed out.
void KeyRegistry::commit(Entries next, const config::Config& fileConfig, KeyChangeResult& r) {
  try {
    merge(next, fileConfig);
  } catch (const std::exception& ex) {
    r.secret.clear();
    r.error = KeyChangeError{400, ex.what(), "invalid_key"};
    return;
  }
  entries_ = std::move(next);
}

KeyChangeResult KeyRegistry::create(const std::string& name, const std::string& settingsJson,
                                    const config::Config& fileConfig) {
  KeyChangeResult r;
  r.name = name;
  json body;
  if (!parseJsonBody(settingsJson, body, r)) return r;
  if (body.is_object()) {
    body.erase("name");  // given apart (it may be in the body too)
  }
  if (auto bad = checkPatch(body)) {
    r.error = bad;
    return r;
  }
  std::lock_guard lock(mutex_);
  auto existing = entries_.find(name);
  if (fileKey(fileConfig, name) ||
      (existing != entries_.end() && !(existing->second.revoked && !existing->second.fromFile))) {
    r.error = KeyChangeError{409, "a key named '" + name + "' exists already", "key_exists"};
    return r;
  }
  r.secret = generateKey();
  body["name"] = name;
  body["sha256"] = toHex(sha256(r.secret));
  Entries next = entries_;
  Entry e;
  e.settings = body.dump();
  e.createdUnix = nowUnix();
  // After a tombstone of the same name, strictly later (replicas order by it).
  e.updatedUnix = existing != entries_.end()
                      ? std::max(e.createdUnix, existing->second.updatedUnix + 1)
                      : e.createdUnix;
  next[name] = std::move(e);
  commit(std::move(next), fileConfig, r);
  return r;
}

KeyChangeResult KeyRegistry::update(const std::string& name, const std::string& patchJson,
                                    const config::Config& fileConfig) {
  KeyChangeResult r;
  r.name = name;
  json patch;
  if (!parseJsonBody(patchJson, patch, r)) return r;
  bool restore = false;
  if (patch.is_object() && patch.contains("revoked")) {
    if (!patch["revoked"].is_boolean() || patch["revoked"].get<bool>()) {
      r.error = KeyChangeError{
          400, "\"revoked\": false restores a revoked file key; revoke with DELETE", "invalid_key"};
      return r;
    }
    restore = true;
    patch.erase("revoked");
  }
  if (auto bad = checkPatch(patch)) {
    r.error = bad;
    return r;
  }
  std::lock_guard lock(mutex_);
  const config::Key* file = fileKey(fileConfig, name);
  auto it = entries_.find(name);
  if (!file && !liveApiKey(it)) {
    r.error = KeyChangeError{404, "no key is named '" + name + "'", "key_not_found"};
    return r;
  }
  if (restore && !file) {
    r.error = KeyChangeError{400, "only a revoked file key can be restored", "invalid_key"};
    return r;
  }
  Entries next = entries_;
  Entry& e = next[name];
  if (file && it == entries_.end()) startOverlay(e);
  if (e.revoked && !restore) {
    r.error =
        KeyChangeError{409, "the key '" + name + "' is revoked; restore it first", "key_revoked"};
    return r;
  }
  if (restore) e.revoked = false;
  json settings = json::parse(e.settings);
  if (e.fromFile) {
    for (const auto& [field, value] : patch.items())
      settings[field] = value;  // null: back to the file
    json kept = json::object();
    for (const auto& [field, value] : settings.items()) {
      if (!value.is_null()) kept[field] = value;
    }
    settings = std::move(kept);
  } else {
    applyPatch(settings, patch);
  }
  e.settings = settings.dump();
  e.updatedUnix = laterThan(e.updatedUnix);
  commit(std::move(next), fileConfig, r);
  return r;
}

KeyChangeResult KeyRegistry::revoke(const std::string& name, const config::Config& fileConfig) {
  KeyChangeResult r;
  r.name = name;
  std::lock_guard lock(mutex_);
  const config::Key* file = fileKey(fileConfig, name);
  auto it = entries_.find(name);
  if (!file && !liveApiKey(it)) {
    r.error = KeyChangeError{404, "no key is named '" + name + "'", "key_not_found"};
    return r;
  }
  if (!file) {
    // An API key is gone for good. The entry stays as a tombstone (no
    // settings, no digests) so that the revocation wins over an older copy
    // on another replica; the name may be created again.
    Entry& gone = it->second;
    gone.revoked = true;
    gone.settings = "{}";
    gone.previous.clear();
    gone.updatedUnix = laterThan(gone.updatedUnix);
    return r;
  }
  Entry& e = entries_[name];
  if (it == entries_.end()) startOverlay(e);
  e.revoked = true;
  e.previous.clear();
  e.updatedUnix = laterThan(e.updatedUnix);
  return r;
}

KeyChangeResult KeyRegistry::rotate(const std::string& name, std::int64_t graceSeconds,
                                    const config::Config& fileConfig) {
  KeyChangeResult r;
  r.name = name;
  std::lock_guard lock(mutex_);
  const config::Key* file = fileKey(fileConfig, name);
  auto it = entries_.find(name);
  if (!file && !liveApiKey(it)) {
    r.error = KeyChangeError{404, "no key is named '" + name + "'", "key_not_found"};
    return r;
  }
  if (it != entries_.end() && it->second.revoked) {
    r.error =
        KeyChangeError{409, "the key '" + name + "' is revoked; restore it first", "key_revoked"};
    return r;
  }
  Entries next = entries_;
  Entry& e = next[name];
  if (file && it == entries_.end()) startOverlay(e);
  json settings = json::parse(e.settings);
  std::string oldDigest = settings.contains("sha256") ? settings["sha256"].get<std::string>()
                                                      : (file ? file->sha256 : std::string());
  r.secret = generateKey();
  settings["sha256"] = toHex(sha256(r.secret));
  e.settings = settings.dump();
  e.previous = unexpired(e.previous);
  if (graceSeconds > 0 && !oldDigest.empty())
    e.previous.push_back(config::PreviousDigest{oldDigest, nowUnix() + graceSeconds});
  e.updatedUnix = laterThan(e.updatedUnix);
  commit(std::move(next), fileConfig, r);
  return r;
}

std::optional<KeyEntryInfo> KeyRegistry::info(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  return KeyEntryInfo{it->second.fromFile, it->second.revoked, it->second.createdUnix,
                      it->second.updatedUnix, unexpired(it->second.previous)};
}

std::vector<std::string> KeyRegistry::revokedFileKeys() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) {
    if (e.fromFile && e.revoked) out.push_back(name);
  }
  return out;
}

json KeyRegistry::entryToJson(const Entry& e) {
  json previous = json::array();
  for (const auto& p : e.previous)
    previous.push_back({{"sha256", p.sha256}, {"until", p.untilUnix}});
  return {{"from_file", e.fromFile},  {"settings", json::parse(e.settings)},
          {"previous", previous},     {"revoked", e.revoked},
          {"created", e.createdUnix}, {"updated", e.updatedUnix}};
}

// Empty on success, else what is wrong with `v`.
std::string KeyRegistry::entryFromJson(const std::string& name, const json& v, Entry& e) {
  if (!v.is_object() || !v.contains("settings") || !v["settings"].is_object())
    return "key '" + name + "' has no settings object";
  e.fromFile = v.value("from_file", false);
  e.settings = v["settings"].dump();
  e.revoked = v.value("revoked", false);
  e.createdUnix = v.value("created", std::int64_t{0});
  e.updatedUnix = v.value("updated", std::int64_t{0});
  if (v.contains("previous") && v["previous"].is_array()) {
    for (const auto& p : v["previous"]) {
      if (!p.is_object() || !p.contains("sha256") || !p["sha256"].is_string())
        return "key '" + name + "' has a malformed previous digest";
      e.previous.push_back({p["sha256"].get<std::string>(), p.value("until", std::int64_t{0})});
    }
  }
  return {};
}

std::optional<std::string> KeyRegistry::flush() const {
  if (path_.empty()) return std::nullopt;
  json doc = {{"version", 1}, {"keys", json::object()}};
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, e] : entries_)
      doc["keys"][name] = entryToJson(e);
  }
  return replaceFileAtomically(path_, doc.dump(2) + "\n");
}

std::map<std::string, std::string> KeyRegistry::exportEntries() const {
  std::map<std::string, std::string> out;
  std::lock_guard lock(mutex_);
  for (const auto& [name, e] : entries_)
    out.emplace(name, entryToJson(e).dump());
  return out;
}

std::optional<std::string> KeyRegistry::exportEntry(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  return entryToJson(it->second).dump();
}

// The later change wins; within the same second the larger text, so that
// every replica picks the same one.
bool KeyRegistry::newerEntry(const std::string& a, const std::string& b) {
  json x = json::parse(a, nullptr, false), y = json::parse(b, nullptr, false);
  const std::int64_t ua = x.is_object() ? x.value("updated", std::int64_t{0}) : 0;
  const std::int64_t ub = y.is_object() ? y.value("updated", std::int64_t{0}) : 0;
  if (ua != ub) return ua > ub;
  return a > b;
}

std::vector<std::string> KeyRegistry::importEntries(
    const std::map<std::string, std::string>& shared, const config::Config& fileConfig,
    std::vector<std::string>& refused) {
  std::lock_guard lock(mutex_);
  // What would change: entries that parse and are newer than ours.
  std::vector<std::pair<std::string, Entry>> changes;
  for (const auto& [name, text] : shared) {
    json v = json::parse(text, nullptr, false);
    Entry e;
    if (v.is_discarded() || !entryFromJson(name, v, e).empty()) {
      refused.push_back(name + ": not a key entry");
      continue;
    }
    auto it = entries_.find(name);
    if (it != entries_.end() && !newerEntry(text, entryToJson(it->second).dump())) continue;
    changes.emplace_back(name, std::move(e));
  }
  std::vector<std::string> taken;
  if (changes.empty()) return taken;
  // Nearly always they fit together, and one merge checks them all: a merge
  // parses every key, so one per change would cost the square of the key
  // count (minutes for a first read of thousands of keys).
  Entries all = entries_;
  for (const auto& [name, e] : changes)
    all[name] = e;
  try {
    merge(all, fileConfig);
    entries_ = std::move(all);
    for (const auto& change : changes)
      taken.push_back(change.first);
    return taken;
  } catch (const config::ConfigError&) {
    // One of them does not fit this config: one at a time, so that the
    // others are taken and each refusal is named.
  }
  for (auto& [name, e] : changes) {
    Entries trial = entries_;
    trial[name] = std::move(e);
    try {
      merge(trial, fileConfig);
    } catch (const config::ConfigError& err) {
      refused.push_back(err.what());
      continue;
    }
    entries_ = std::move(trial);
    taken.push_back(name);
  }
  return taken;
}

void KeyRegistry::load() {
  if (path_.empty()) return;
  FileRead file = readWholeFile(path_);
  if (!file.found) return;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error(path_ + ": " + why +
                             " (fix or remove the file; it holds the keys "
                             "created and changed through the admin API)");
  };
  if (!file.error.empty()) fail(file.error);
  json doc = json::parse(file.contents, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) fail("not a JSON object");
  if (doc.value("version", 0) != 1) fail("unknown version (expected 1)");
  if (!doc.contains("keys") || !doc["keys"].is_object()) fail("no \"keys\" object");
  Entries loaded;
  for (const auto& [name, v] : doc["keys"].items()) {
    Entry e;
    if (std::string why = entryFromJson(name, v, e); !why.empty()) fail(why);
    loaded.emplace(name, std::move(e));
  }
  std::lock_guard lock(mutex_);
  entries_ = std::move(loaded);
}

}  // namespace relay::admission
