// The gateway's key administration: runtime key changes from the admin API,
// those other replicas shared through Redis, and the audit line of each.
#include <optional>

#include <spdlog/spdlog.h>

#include "gateway.hpp"
#include "relay/common/json_write.hpp"
#include "relay/telemetry/access_log.hpp"

namespace relay::app {

Reply Gateway::changeKeys(const api::KeyOp& op) {
  std::lock_guard serial(reloadMutex_);
  admission::KeyChangeResult r;
  std::string_view action;
  switch (op.kind) {
    case api::KeyOp::Kind::kCreate:
      r = keys_->create(op.name, op.body, fileConfig_);
      action = "key.created";
      break;
    case api::KeyOp::Kind::kUpdate:
      r = keys_->update(op.name, op.body, fileConfig_);
      action = "key.updated";
      break;
    case api::KeyOp::Kind::kRevoke:
      r = keys_->revoke(op.name, fileConfig_);
      action = "key.revoked";
      break;
    case api::KeyOp::Kind::kRotate:
      r = keys_->rotate(op.name, op.graceSeconds, fileConfig_);
      action = "key.rotated";
      break;
  }
  if (r.error) {
    return Reply{r.error->status,
                 openAiErrorJson(r.error->message, "invalid_request_error", r.error->code)};
  }
  std::optional<std::string> unsaved = keys_->flush();
  try {
    applyConfig(fileConfig_);
  } catch (const std::exception& e) {
    spdlog::error("key change {} of '{}' could not be applied: {}", action, op.name, e.what());
    return Reply{500, openAiErrorJson(std::string("the change was stored but could not be "
                                                  "applied: ") +
                                          e.what(),
                                      "server_error", "key_change_failed")};
  }
  audit(action, op.name, op.kind == api::KeyOp::Kind::kUpdate ? std::string_view(op.body) : "");
  if (keyPublisher_) {
    if (std::optional<std::string> entry = keys_->exportEntry(op.name))
      keyPublisher_->publish(op.name, std::move(*entry));
  }
  std::string body = "{\"object\":\"key\",\"name\":";
  appendJsonString(body, op.name);
  body += ",\"action\":";
  appendJsonString(body, action);
  if (!r.secret.empty()) {
    body += ",\"key\":";  // the only time the secret is ever shown
    appendJsonString(body, r.secret);
  }
  body += ",\"persisted\":";
  body += keys_->persistent() && !unsaved ? "true" : "false";
  if (unsaved) {
    body += ",\"warning\":";
    appendJsonString(body, "applied but not saved to state_dir: " + *unsaved);
  }
  body += '}';
  return Reply{op.kind == api::KeyOp::Kind::kCreate ? 201 : 200, std::move(body)};
}

void Gateway::takeSharedKeys(const std::map<std::string, std::string>& shared) {
  std::lock_guard serial(reloadMutex_);
  std::vector<std::string> refused;
  std::vector<std::string> taken = keys_->importEntries(shared, fileConfig_, refused);
  for (const std::string& why : refused)
    spdlog::warn("runtime keys: a change from another replica does not fit this config: {}", why);
  if (!taken.empty()) {
    if (std::optional<std::string> unsaved = keys_->flush())
      spdlog::warn("runtime keys: not saved to state_dir: {}", *unsaved);
    try {
      applyConfig(fileConfig_);
      for (const std::string& name : taken)
        spdlog::info("runtime keys: '{}' changed on another replica; applied", name);
    } catch (const std::exception& e) {
      spdlog::error("runtime keys from another replica could not be applied: {}", e.what());
    }
  }
  // Ours that Redis lacks or has older (this replica changed them while
  // Redis was away, or is the first to share them) go to every replica.
  if (!keyPublisher_) return;
  for (auto& [name, entry] : keys_->exportEntries()) {
    auto it = shared.find(name);
    if (it != shared.end() && !admission::KeyRegistry::newerEntry(entry, it->second)) continue;
    keyPublisher_->publish(name, entry);
  }
}

// One line in the access log per admin change, never with a secret.
void Gateway::audit(std::string_view action, const std::string& keyName, std::string_view detail) {
  spdlog::info("admin: {} '{}'", action, keyName);
  if (!services_.accessLog) return;
  std::string line = "{\"time\":\"";
  telemetry::appendRfc3339Millis(line, std::chrono::system_clock::now());
  line += "\",\"audit\":";
  appendJsonString(line, action);
  line += ",\"key\":";
  appendJsonString(line, keyName);
  if (!detail.empty()) {
    line += ",\"changes\":";
    appendJsonString(line, detail);
  }
  line += '}';
  services_.accessLog->write(line);
}

}  // namespace relay::app
