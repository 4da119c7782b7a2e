// The key gate of a gateway whose replicas share one Redis (cluster.redis_url):
// every replica admits against one set of buckets, concurrency slots and
// budgets per key. docs/operations.md "Shared state" describes the keys, the
// leases and the failure modes; scripts.hpp the scripts.
//
// One gate per worker, on the worker's loop, with its own pipelined
// connection. Admission is one script call; settlement is sent after the
// response without waiting. When Redis is slow or gone the gate decides per
// cluster.on_redis_failure: `local` admits on this replica's own limiters
// (each replica enforcing a key's whole limit) and budgets (raised to the
// key's last spend seen in Redis), and replays the spend of what it admitted
// once Redis is back; `reject` answers 503.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "relay/config/config.hpp"
#include "relay/pipeline/key_gate.hpp"

namespace boost::asio {
class io_context;
}

namespace relay::cluster {

// Process-wide work done by one worker's gate (worker 0), given by the gateway.
struct ClusterHooks {
  // The serving snapshot: every kBudgetSyncInterval the gate reads each
  // budgeted key's shared spend into the process's budgets (so a fallback to
  // local state starts from what the whole swarm spent, and /admin/keys
  // shows it), and on each (re)connect pushes them as floors.
  std::function<std::shared_ptr<const pipeline::Snapshot>()> current;
  // The runtime keys as Redis holds them (name -> entry JSON, the keys.json
  // shape), each time kr:keys:version moved (polled every kKeysPollInterval).
  // Called on the worker's loop: hand the work to another thread.
  std::function<void(std::map<std::string, std::string>)> keysChanged;
};

// Sends runtime key entries to Redis for every replica. Thread-safe; what
// cannot be sent now is sent when Redis is back.
class KeyPublisher {
 public:
  virtual ~KeyPublisher() = default;
  virtual void publish(std::string name, std::string entryJson) = 0;
};

struct RedisGateParts {
  std::unique_ptr<pipeline::KeyGate> gate;
  std::shared_ptr<KeyPublisher> publisher;  // set when hooks were given
};

// Connects on `context` (the worker's loop) in the background; until the
// connection is ready, requests are decided per on_redis_failure.
RedisGateParts makeRedisGate(boost::asio::io_context& context, const config::Cluster& cluster,
                             ClusterHooks hooks = {});

inline constexpr std::chrono::seconds kKeysPollInterval{1};
inline constexpr std::chrono::seconds kBudgetSyncInterval{2};

// A running request's lease in Redis lives this long unless renewed; it is
// renewed every third of it while the request runs, so the slots and budget
// holds of a replica that died come free within this time. 30 s, or
// $KIMI_RELAY_LEASE_MS (500 to 600000; the tests shorten it).
std::chrono::milliseconds leaseTime();

}  // namespace relay::cluster
