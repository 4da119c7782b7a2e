#include "relay/upstream/catalog.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace relay::upstream {

Catalog::Catalog(const std::vector<config::Upstream>& upstreams) {
  std::map<std::string, std::vector<Candidate>> byModel;  // sorted: /v1/models lists in order
  for (std::size_t i = 0; i < upstreams.size(); ++i) {
    const config::Upstream& u = upstreams[i];
    UpstreamInfo info;
    info.name = u.name;
    try {
      info.target = parseTarget(u.baseUrl);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("upstream '" + u.name + "': base_url " + e.what());
    }
    info.authorization = "Bearer " + u.apiKey;
    info.caFile = u.caFile;
    info.config = &u;
    info.chatPath = info.target.path("/chat/completions");
    info.embeddingsPath = info.target.path("/embeddings");
    upstreams_.push_back(std::move(info));
    for (const auto& [clientModel, upstreamModel] : u.models) {
      byModel[clientModel].push_back(
          Candidate{i, upstreamModel, std::max<std::uint32_t>(1, u.weight)});
    }
  }
  for (auto& [model, candidates] : byModel) {
    std::vector<std::size_t> indexes;
    for (const Candidate& c : candidates)
      indexes.push_back(c.upstream);
    routes_.push_back(ModelRoute{routes_.size(), model, std::move(candidates), std::move(indexes)});
  }
}

const ModelRoute* Catalog::route(std::string_view model) const {
  auto it = std::lower_bound(routes_.begin(), routes_.end(), model,
                             [](const ModelRoute& r, std::string_view m) { return r.model < m; });
  return it != routes_.end() && it->model == model ? &*it : nullptr;
}

}  // namespace relay::upstream
