#include "relay/upstream/selector.hpp"

namespace relay::upstream {

SmoothWeightedSelector::SmoothWeightedSelector(std::vector<std::uint32_t> weights)
    : weights_(std::move(weights)), current_(weights_.size(), 0) {}

int SmoothWeightedSelector::pick(std::span<const bool> eligible) {
  // Each round every eligible candidate gains its weight; the leader is picked
  // and pays back the round's total. Ineligible candidates sit the round out,
  // so the remaining ones keep their relative proportions.
  int best = -1;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < weights_.size(); ++i) {
    if (!eligible.empty() && !eligible[i]) continue;
    current_[i] += weights_[i];
    total += weights_[i];
    if (best < 0 || current_[i] > current_[static_cast<std::size_t>(best)])
      best = static_cast<int>(i);
  }
  if (best >= 0) current_[static_cast<std::size_t>(best)] -= total;
  return best;
}

}  // namespace relay::upstream
