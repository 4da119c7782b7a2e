// What a worker's Redis gate (redis_gate.cpp) shares with its tickets and
// with the background loops that keep a replica in step with the swarm
// (gate_sync.cpp). Internal to src/cluster.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "redis_link.hpp"
#include "relay/admission/budget.hpp"
#include "relay/config/config.hpp"
#include "relay/net/exchange.hpp"

namespace relay::pipeline {
struct Snapshot;
}

namespace relay::cluster {

namespace asio = boost::asio;
using admission::BudgetAsk;

class RedisTicket;

// Spend admitted by local fallbacks whose charge has not reached Redis yet,
// per key, across every worker of the process. A replica's spend floor
// leaves it out, so a floor and the replayed charge never count it twice.
class OutageSpend {
 public:
  void add(const std::string& key, const BudgetAsk& cost) {
    std::lock_guard lock(mutex_);
    BudgetAsk& p = pending_[key];
    p.usd += cost.usd;
    p.inputTokens += cost.inputTokens;
    p.outputTokens += cost.outputTokens;
    entries_.store(pending_.size(), std::memory_order_release);
  }
  void sub(const std::string& key, const BudgetAsk& cost) {
    std::lock_guard lock(mutex_);
    auto it = pending_.find(key);
    if (it == pending_.end()) return;
    it->second.usd -= cost.usd;
    it->second.inputTokens -= cost.inputTokens;
    it->second.outputTokens -= cost.outputTokens;
    if (it->second.usd <= 0 && it->second.inputTokens == 0 && it->second.outputTokens == 0)
      pending_.erase(it);
    entries_.store(pending_.size(), std::memory_order_release);
  }
  bool empty() const { return entries_.load(std::memory_order_acquire) == 0; }
  // What `seen` includes that Redis has not been sent yet, taken out.
  admission::BudgetUsage floorOf(const std::string& key, admission::BudgetUsage seen) {
    if (entries_.load(std::memory_order_acquire) == 0) return seen;  // no outage: no lock
    std::lock_guard lock(mutex_);
    auto it = pending_.find(key);
    if (it == pending_.end()) return seen;
    seen.spent = std::max<admission::NanoUsd>(0, seen.spent - it->second.usd);
    seen.inputTokens -= std::min(seen.inputTokens, it->second.inputTokens);
    seen.outputTokens -= std::min(seen.outputTokens, it->second.outputTokens);
    return seen;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, BudgetAsk> pending_;
  std::atomic<std::size_t> entries_{0};
};

// One per process (every worker's gate shares it).
inline OutageSpend& outageSpend() {
  static OutageSpend spend;
  return spend;
}

// What a worker's gate and its tickets share (a ticket may outlive the gate
// at exit).
struct GateCore {
  GateCore(asio::io_context& context, const config::Cluster& c) : cluster(c), renewTimer(context) {}
  std::shared_ptr<RedisLink> link;
  config::Cluster cluster;
  std::string idPrefix;
  std::uint64_t counter = 0;
  std::unordered_set<RedisTicket*> live;  // leases to renew
  asio::steady_timer renewTimer;
  bool stopped = false;

  std::string nextId() { return idPrefix + std::to_string(++counter); }
};

using CurrentSnapshot = std::function<std::shared_ptr<const pipeline::Snapshot>()>;

// The background loops (gate_sync.cpp). Each runs on the gate's io_context
// until core->stopped.
// Runtime keys: when kr:keys:version moves (or on the first poll after each
// connect), the whole kr:keys hash goes to `changed`.
net::Task<void> keysPollLoop(std::shared_ptr<GateCore> core,
                             std::function<void(std::map<std::string, std::string>)> changed);
// After a (re)connect: once the replayed outage charges are in, the floors.
net::Task<void> floorsWhenReplayed(std::shared_ptr<GateCore> core, CurrentSnapshot current);
// Every kBudgetSyncInterval: Redis's spend of each budgeted key into ours.
net::Task<void> budgetSyncLoop(std::shared_ptr<GateCore> core, CurrentSnapshot current);

}  // namespace relay::cluster
