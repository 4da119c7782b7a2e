// `kimi-relay keys create|list|show|update|revoke|rotate ...`: the runtime key
// API of a running gateway, from the command line.
#pragma once

#include <string>
#include <vector>

namespace relay::app {

// args[0] is "keys", args[1] the action. Returns the exit code (0 when the
// gateway accepted the call), or -1 when the action is not one of these.
int keysAdminCommand(const std::vector<std::string>& args);

}  // namespace relay::app
