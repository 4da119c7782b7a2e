// The settings a reload reads but cannot apply: they were fixed when the
// listeners, the worker loops and the shared-state connection started.
// A reload that changes one applies the rest of the file and names exactly
// the keys it left (docs/operations.md, "Reload", keeps the same list; a unit
// test holds the two together).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "relay/config/config.hpp"

namespace relay::app {

struct RestartOnlySetting {
  std::string_view key;  // as written in the file, from the top: "server.workers"
  bool (*changed)(const config::Config& was, const config::Config& now);
};

// Every restart-only setting, in the order of docs/configuration.md.
std::span<const RestartOnlySetting> restartOnlySettings();

// The keys of those that differ between `was` and `now`, in that order.
std::vector<std::string_view> restartOnlyChanges(const config::Config& was,
                                                 const config::Config& now);

// "reload: server.workers, server.send_buffer_bytes change only on restart;
// the running values stay", or "" for none. Names keys, never values (a
// redis_url carries a password).
std::string restartOnlyWarning(const std::vector<std::string_view>& keys);

}  // namespace relay::app
