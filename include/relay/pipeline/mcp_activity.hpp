// When each MCP session was last used, so that idle sessions end
// (mcp.session_idle_ms): a request on a session idle longer than that gets
// 404 (the client initializes a new one, as the spec says), and a sweeper
// sends the server a DELETE so it frees what the session holds.
//
// Process-wide (every worker's requests touch it; one mutex, taken once per
// MCP request). A session this process has not seen — opened before a
// restart, or on another replica — counts as fresh on first use: the signed
// id already proves it genuine, and only idleness is judged here. At most
// kMaxSessions are tracked; beyond that the least recently used is forgotten
// (it is judged fresh again if it comes back).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "relay/pipeline/mcp_session.hpp"

namespace relay::pipeline {

class McpActivity {
 public:
  static constexpr std::size_t kMaxSessions = 100'000;

  enum class Touch { kFresh, kActive, kExpired };

  explicit McpActivity(std::size_t maxSessions = kMaxSessions) : max_(maxSessions) {}

  // Records a use of session `id` at `nowMs`. kExpired (and the session is
  // forgotten) when its last use is more than `idleMs` ago.
  Touch touch(const std::string& id, const McpSession& session, std::int64_t nowMs,
              std::int64_t idleMs);
  // The caller ended it (DELETE).
  void forget(const std::string& id);
  // Removes and returns up to `max` sessions idle longer than `idleMs`.
  std::vector<McpSession> takeExpired(std::int64_t nowMs, std::int64_t idleMs, std::size_t max);
  std::size_t size() const;

 private:
  struct Entry {
    std::string id;
    McpSession session;
    std::int64_t lastMs = 0;
  };
  using List = std::list<Entry>;  // most recently used first
  mutable std::mutex mutex_;
  List lru_;
  std::unordered_map<std::string, List::iterator> byId_;
  const std::size_t max_;
};

// The process's table.
McpActivity& mcpActivity();

}  // namespace relay::pipeline
