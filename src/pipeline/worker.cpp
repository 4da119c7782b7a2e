#include "relay/pipeline/worker.hpp"

#include "relay/pipeline/mcp.hpp"

namespace relay::pipeline {
namespace {

std::shared_ptr<upstream::ClientPool> makePool(const Snapshot& snapshot) {
  std::vector<upstream::ClientPool::UpstreamSpec> specs;
  for (const auto& u : snapshot.catalog.upstreams())
    specs.push_back({u.target, u.caFile});
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
  rebuildSelectors();
  mcp_ = makeMcpUpstreams(snapshot_->config.mcp, nullptr);
}

void Worker::setSnapshot(std::shared_ptr<const Snapshot> snapshot) {
  if (!sameEndpoints(*snapshot_, *snapshot)) clients_ = makePool(*snapshot);
  snapshot_ = std::move(snapshot);
  rebuildSelectors();
  // Keeps the MCP client pool when the instance URLs did not change.
  mcp_ = makeMcpUpstreams(snapshot_->config.mcp, mcp_.get());
}

void Worker::releaseConnections() {
  gate_->stop();
  clients_.reset();
  mcp_.reset();
}

void Worker::abortStreams() {
  shuttingDown_ = true;
  std::vector<upstream::ResponseStream*> open(streams_.begin(), streams_.end());
  for (upstream::ResponseStream* s : open)
    s->abort();
}

void Worker::rebuildSelectors() {
  selectors_.clear();
  for (const auto& route : snapshot_->catalog.routes()) {
    std::vector<std::uint32_t> weights;
    for (const auto& c : route.candidates)
      weights.push_back(c.weight);
    selectors_.emplace_back(std::move(weights));
  }
}

}  // namespace relay::pipeline
