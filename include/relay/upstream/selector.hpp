// Smooth weighted round-robin (the nginx upstream algorithm): over any window of
// sum(weights) picks, each candidate is chosen exactly `weight` times, and the
// picks are interleaved rather than bunched. Pure logic, no locks: each worker
// owns its own selector state, so workers never contend on it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace relay::upstream {

class SmoothWeightedSelector {
 public:
  // `weights[i]` >= 1 for candidate i.
  explicit SmoothWeightedSelector(std::vector<std::uint32_t> weights);

  // Picks among the candidates whose `eligible[i]` is true (all when empty).
  // Returns -1 when none is eligible.
  int pick(std::span<const bool> eligible = {});

  std::size_t size() const { return weights_.size(); }

 private:
  std::vector<std::uint32_t> weights_;
  std::vector<std::int64_t> current_;
};

}  // namespace relay::upstream
