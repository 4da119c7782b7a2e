// The JSON the console reads (private to api/; shapes in docs/operations.md,
// Console). Names, settings and figures only: no caller key, upstream key,
// digest or session secret is ever in them.
#pragma once

#include <string>

#include "relay/api/admin.hpp"

namespace relay::api {

// GET /admin/console/state: keys (at most kConsoleMaxKeys), upstreams and
// swarm nodes as they are now.
std::string consoleStateJson(const AdminState& state);

// GET /admin/console/history: the process's last hour, one sample per 10 s
// (telemetry::LiveStats::kHistoryPoints at most), as columns.
std::string consoleHistoryJson(const AdminState& state);

}  // namespace relay::api
