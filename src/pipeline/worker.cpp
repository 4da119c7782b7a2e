#include "relay/pipeline/worker.hpp"

#include <cstdio>

namespace relay::pipeline {

Worker::Worker(unsigned index, std::shared_ptr<const Snapshot> snapshot)
    : index_(index), snapshot_(std::move(snapshot)), random_(std::random_device{}()) {
  std::vector<upstream::ClientPool::UpstreamSpec> specs;
  for (const auto& u : snapshot_->catalog.upstreams()) specs.push_back({u.target, u.caFile});
  clients_ = std::make_unique<upstream::ClientPool>(std::move(specs));
  for (const auto& route : snapshot_->catalog.routes()) {
    std::vector<std::uint32_t> weights;
    for (const auto& c : route.candidates) weights.push_back(c.weight);
    selectors_.emplace_back(std::move(weights));
  }
}

std::string Worker::newRequestId() {
  char buf[32];
  std::uint64_t a = random_();
  std::uint32_t b = static_cast<std::uint32_t>(random_());
  std::snprintf(buf, sizeof buf, "req_%016llx%08x", static_cast<unsigned long long>(a), b);
  return buf;
}

}  // namespace relay::pipeline
