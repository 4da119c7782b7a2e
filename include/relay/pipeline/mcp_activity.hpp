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
  // Sessions ended for idleness that are remembered as ended (so their next
  // request hears why, without asking the server); the oldest is forgotten first.
  static constexpr std::size_t kMaxEnded = 10'000;

  // kExpired: idle too long, ended now (the caller ends it at the server);
  // kEnded: the sweeper ended it already.
  enum class Touch { kFresh, kActive, kExpired, kEnded };

  explicit McpActivity(std::size_t maxSessions = kMaxSessions) : max_(maxSessions) {}

  // Records a use of session `id` at `nowMs`. kExpired (and the session is
  // forgotten) when its last use is more than `idleMs` ago, or the sweeper
  // ended it.
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
  void remember(std::string id);  // mutex_ held
  mutable std::mutex mutex_;
  List lru_;
  std::unordered_map<std::string, List::iterator> byId_;
  std::list<std::string> endedOrder_;  // oldest first
  std::unordered_map<std::string, std::list<std::string>::iterator> ended_;
  const std::size_t max_;
};

// The process's table.
McpActivity& mcpActivity();

}  // namespace relay::pipeline
