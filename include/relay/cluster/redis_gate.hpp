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
#include <memory>

#include "relay/config/config.hpp"
#include "relay/pipeline/key_gate.hpp"

namespace boost::asio {
class io_context;
}

namespace relay::cluster {

// Connects on `context` (the worker's loop) in the background; until the
// connection is ready, requests are decided per on_redis_failure. When
// `current` is given (one worker per process), the gate also reads every
// budgeted key's shared spend every kBudgetSyncInterval into the process's
// budgets, so that a fallback to local state starts from what the whole
// swarm spent and /admin/keys shows it.
std::unique_ptr<pipeline::KeyGate> makeRedisGate(
    boost::asio::io_context& context, const config::Cluster& cluster,
    std::function<std::shared_ptr<const pipeline::Snapshot>()> current = {});

inline constexpr std::chrono::seconds kBudgetSyncInterval{2};

// A running request's lease in Redis lives this long unless renewed; it is
// renewed every third of it while the request runs, so the slots and budget
// holds of a replica that died come free within this time. 30 s, or
// $KIMI_RELAY_LEASE_MS (500 to 600000; the tests shorten it).
std::chrono::milliseconds leaseTime();

}  // namespace relay::cluster
