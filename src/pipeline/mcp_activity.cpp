#include "relay/pipeline/mcp_activity.hpp"

namespace relay::pipeline {

McpActivity::Touch McpActivity::touch(const std::string& id, const McpSession& session,
                                      std::int64_t nowMs, std::int64_t idleMs) {
  std::lock_guard lock(mutex_);
  if (auto gone = ended_.find(id); gone != ended_.end()) {
    endedOrder_.erase(gone->second);
    ended_.erase(gone);
    return Touch::kEnded;
  }
  auto it = byId_.find(id);
  if (it != byId_.end()) {
    List::iterator e = it->second;
    if (nowMs - e->lastMs > idleMs) {
      lru_.erase(e);
      byId_.erase(it);
      return Touch::kExpired;
    }
    e->lastMs = nowMs;
    lru_.splice(lru_.begin(), lru_, e);
    return Touch::kActive;
  }
  if (lru_.size() >= max_) {
    byId_.erase(lru_.back().id);
    lru_.pop_back();
  }
  lru_.push_front(Entry{id, session, nowMs});
  byId_.emplace(id, lru_.begin());
  return Touch::kFresh;
}

void McpActivity::forget(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = byId_.find(id);
  if (it == byId_.end()) return;
  lru_.erase(it->second);
  byId_.erase(it);
}

std::vector<McpSession> McpActivity::takeExpired(std::int64_t nowMs, std::int64_t idleMs,
                                                 std::size_t max) {
  std::vector<McpSession> out;
  std::lock_guard lock(mutex_);
  while (!lru_.empty() && out.size() < max && nowMs - lru_.back().lastMs > idleMs) {
    out.push_back(std::move(lru_.back().session));
    byId_.erase(lru_.back().id);
    remember(std::move(lru_.back().id));
    lru_.pop_back();
  }
  return out;
}

void McpActivity::remember(std::string id) {
  if (ended_.size() >= kMaxEnded) {
    ended_.erase(endedOrder_.front());
    endedOrder_.pop_front();
  }
  endedOrder_.push_back(id);
  ended_.emplace(std::move(id), std::prev(endedOrder_.end()));
}

std::size_t McpActivity::size() const {
  std::lock_guard lock(mutex_);
  return lru_.size();
}

McpActivity& mcpActivity() {
  static McpActivity table;
  return table;
}

}  // namespace relay::pipeline
