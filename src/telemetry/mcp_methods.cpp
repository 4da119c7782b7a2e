// The fixed label set of MCP methods: a caller chooses the JSON-RPC method
// name, so only these become label values.
#include <array>

#include "relay/telemetry/record.hpp"

namespace relay::telemetry {
namespace {

// In McpMethod order.
constexpr std::array<std::string_view, static_cast<std::size_t>(McpMethod::kCount)> kLabels = {
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "notification",
    "response",
    "batch",
    "stream_open",
    "session_delete",
    "other",
};

// A value added to McpMethod without a label here would be an empty string.
static_assert([] {
  for (std::string_view l : kLabels) {
    if (l.empty()) return false;
  }
  return kLabels.back() == "other";
}());

}  // namespace

McpMethod mcpMethodOf(std::string_view method) {
  if (method.starts_with("notifications/")) return McpMethod::kNotification;
  // Only JSON-RPC request names map by name; the last five labels are kinds
  // of exchange the relay names itself.
  for (std::size_t i = 0; i < static_cast<std::size_t>(McpMethod::kNotification); ++i) {
    if (kLabels[i] == method) return static_cast<McpMethod>(i);
  }
  return McpMethod::kOther;
}

std::string_view mcpMethodLabel(McpMethod m) {
  const auto i = static_cast<std::size_t>(m);
  return i < kLabels.size() ? kLabels[i] : kLabels.back();
}

}  // namespace relay::telemetry
