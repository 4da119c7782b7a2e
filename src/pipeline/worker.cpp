#include "relay/pipeline/worker.hpp"

#include <random>

#include "relay/common/coarse_clock.hpp"
#include "relay/pipeline/mcp.hpp"

namespace relay::pipeline {
namespace {

std::shared_ptr<upstream::ClientPool> makePool(const Snapshot& snapshot) {
  std::vector<upstream::ClientPool::UpstreamSpec> specs;
  for (const auto& u : snapshot.catalog.upstreams())
    specs.push_back({u.target, u.caFile, u.config->maxIdleConnections,
                     std::chrono::milliseconds(u.config->maxIdleMs)});
  return std::make_shared<upstream::ClientPool>(std::move(specs));
}

bool sameEndpoints(const Snapshot& a, const Snapshot& b) {
  const auto& x = a.catalog.upstreams();
  const auto& y = b.catalog.upstreams();
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i].target.tls != y[i].target.tls || x[i].target.host != y[i].target.host ||
        x[i].target.port != y[i].target.port || x[i].caFile != y[i].caFile)
      return false;
  }
  return true;
}

}  // namespace

Worker::Worker(std::shared_ptr<const Snapshot> snapshot)
    : snapshot_(std::move(snapshot)), clients_(makePool(*snapshot_)) {
  latency_.resize(snapshot_->catalog.upstreams().size());
  rebuildBalancers();
  mcp_ = makeMcpUpstreams(snapshot_->config.mcp, nullptr);
}

void Worker::setSnapshot(std::shared_ptr<const Snapshot> snapshot) {
  if (!sameEndpoints(*snapshot_, *snapshot)) {
    if (clients_) clients_->retire();  // requests still on it hold it
    clients_ = makePool(*snapshot);
    latency_.assign(snapshot->catalog.upstreams().size(), upstream::PeakEwma());
  } else if (clients_) {
    // The same endpoints: their connections and latencies stay; changed
    // idle limits apply to the pool as it is.
    const auto& ups = snapshot->catalog.upstreams();
    for (std::size_t i = 0; i < ups.size(); ++i)
      clients_->setIdleLimits(i, ups[i].config->maxIdleConnections,
                              std::chrono::milliseconds(ups[i].config->maxIdleMs));
  }
  snapshot_ = std::move(snapshot);
  rebuildBalancers();
  // Keeps the MCP client pool when the instance URLs did not change.
  mcp_ = makeMcpUpstreams(snapshot_->config.mcp, mcp_.get());
}

void Worker::releaseConnections() {
  // A shared gate owns timers and a socket of this worker's loop: it goes
  // with the loop (its tickets are in exchanges the loop destroys).
  gate_->stop();
  gate_ = std::make_unique<LocalKeyGate>();
  clients_.reset();
  mcp_.reset();
}

void Worker::closeStaleConnections() {
  const auto now = coarseSteadyNow();
  if (clients_) clients_->closeStale(now);
  if (mcp_ && mcp_->pool) mcp_->pool->closeStale(now);
}

void Worker::abortStreams() {
  shuttingDown_ = true;
  std::vector<upstream::ResponseStream*> open(streams_.begin(), streams_.end());
  for (upstream::ResponseStream* s : open)
    s->abort();
}

void Worker::rebuildBalancers() {
  balancers_.clear();
  const config::Config& cfg = snapshot_->config;
  std::random_device seed;
  for (const auto& route : snapshot_->catalog.routes()) {
    std::vector<std::uint32_t> weights;
    for (const auto& c : route.candidates)
      weights.push_back(c.weight);
    auto it = cfg.routes.find(route.model);
    const config::Strategy strategy =
        it != cfg.routes.end() && it->second.strategy ? *it->second.strategy : cfg.routing.strategy;
    balancers_.emplace_back(strategy, std::move(weights), route.upstreams, cfg.routing.exploration,
                            &latency_, snapshot_->upstreamStates.get(),
                            (static_cast<std::uint64_t>(seed()) << 32) | seed());
  }
}

}  // namespace relay::pipeline
