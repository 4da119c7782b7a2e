#include "relay/pipeline/worker.hpp"

namespace relay::pipeline {

Worker::Worker(unsigned index, std::shared_ptr<const Snapshot> snapshot)
    : index_(index), snapshot_(std::move(snapshot)) {
  std::vector<upstream::ClientPool::UpstreamSpec> specs;
  for (const auto& u : snapshot_->catalog.upstreams()) specs.push_back({u.target, u.caFile});
  clients_ = std::make_unique<upstream::ClientPool>(std::move(specs));
  for (const auto& route : snapshot_->catalog.routes()) {
    std::vector<std::uint32_t> weights;
    for (const auto& c : route.candidates) weights.push_back(c.weight);
    selectors_.emplace_back(std::move(weights));
  }
}

}  // namespace relay::pipeline
