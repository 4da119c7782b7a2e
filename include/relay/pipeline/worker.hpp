// Per-worker state of the pipeline: the worker's connection pools and weighted
// selectors. Used only from the worker's own event loop, so nothing here locks.
#pragma once

#include <memory>
#include <unordered_set>
#include <vector>

#include "relay/pipeline/key_gate.hpp"
#include "relay/pipeline/snapshot.hpp"
#include "relay/upstream/balancer.hpp"
#include "relay/upstream/client.hpp"

namespace relay::pipeline {

struct McpUpstreams;  // mcp.hpp

class Worker {
 public:
  explicit Worker(std::shared_ptr<const Snapshot> snapshot);

  const Snapshot& snapshot() const { return *snapshot_; }
  std::shared_ptr<const Snapshot> snapshotPtr() const { return snapshot_; }
  upstream::ClientPool& clients() { return *clients_; }
  // The pool built for snapshotPtr()'s upstreams. An exchange takes both
  // together and keeps them: after a reload the worker's pool may index a
  // different upstream list, and upstream i must never get upstream j's key.
  std::shared_ptr<upstream::ClientPool> clientsPtr() const { return clients_; }
  // Routes and client pool of the MCP servers; an exchange keeps the pointer
  // for its whole life (a reload replaces the worker's, never this one).
  std::shared_ptr<McpUpstreams> mcpUpstreams() const { return mcp_; }
  // The balancer of `route` in `snapshot` (its strategy over its
  // candidates), or nullptr when this worker has moved on to a newer
  // snapshot (a reload raced a request in flight).
  upstream::Balancer* balancer(const Snapshot& snapshot, std::size_t route) {
    return &snapshot == snapshot_.get() && route < balancers_.size() ? &balancers_[route] : nullptr;
  }
  // A first-byte time (or a failure's penalty) of `upstream` in `snapshot`,
  // for least_latency; ignored when the worker has moved on.
  void observeLatency(const Snapshot& snapshot, std::size_t upstream, double ms,
                      upstream::SteadyTime now) {
    if (&snapshot == snapshot_.get() && upstream < latency_.size())
      latency_[upstream].observe(ms, now);
  }

  // Where this worker's requests are admitted: the process's own limits
  // unless the gateway installed a shared gate (cluster.redis_url).
  KeyGate& gate() { return *gate_; }
  void setGate(std::unique_ptr<KeyGate> gate) { gate_ = std::move(gate); }

  // Switches to a reloaded config (called on the worker's own thread). The
  // connection pool is kept when the upstreams' addresses did not change;
  // exchanges in flight keep the snapshot and connections they hold.
  void setSnapshot(std::shared_ptr<const Snapshot> snapshot);

  // Streams being relayed to callers, so that shutdown can end each with an
  // SSE error event rather than a cut. Touched only on this worker's thread.
  void streamStarted(upstream::ResponseStream* stream) { streams_.insert(stream); }
  void streamEnded(upstream::ResponseStream* stream) { streams_.erase(stream); }
  // At exit, before the event loops are destroyed: lets go of the pooled
  // upstream connections (their sockets belong to this worker's loop).
  // Exchanges still holding a pool keep it until they are destroyed.
  void releaseConnections();
  // Closes the upstream and MCP server connections idle past their time
  // (the worker's periodic tick; ClientPool::closeStale()).
  void closeStaleConnections();

  // The drain deadline passed: abort every upstream stream still open.
  void abortStreams();
  bool shuttingDown() const { return shuttingDown_; }

 private:
  void rebuildBalancers();

  std::shared_ptr<const Snapshot> snapshot_;
  std::shared_ptr<upstream::ClientPool> clients_;
  std::vector<upstream::PeakEwma> latency_;    // per upstream, this worker's observations
  std::vector<upstream::Balancer> balancers_;  // per route
  std::shared_ptr<McpUpstreams> mcp_;
  std::unique_ptr<KeyGate> gate_ = std::make_unique<LocalKeyGate>();
  std::unordered_set<upstream::ResponseStream*> streams_;
  bool shuttingDown_ = false;
};

}  // namespace relay::pipeline
