// The configured upstreams and, per client model id, the upstreams that serve
// it. Built once per config snapshot; immutable and shared by every worker.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "relay/config/config.hpp"
#include "relay/upstream/target.hpp"

namespace relay::upstream {

struct UpstreamInfo {
  std::string name;
  Target target;
  std::string authorization;  // "Bearer <api_key>"; a secret: never log or echo it
  std::string caFile;
  const config::Upstream* config = nullptr;
  // target.path("/chat/completions") and target.path("/embeddings"), made
  // once: every attempt sends one of them.
  std::string chatPath;
  std::string embeddingsPath;
};

struct Candidate {
  std::size_t upstream = 0;   // index into Catalog::upstreams()
  std::string upstreamModel;  // the id this upstream knows the model by
  std::uint32_t weight = 1;
};

struct ModelRoute {
  std::size_t index = 0;  // position in Catalog::routes()
  std::string model;      // the client's model id
  std::vector<Candidate> candidates;
  std::vector<std::size_t> upstreams;  // candidates[i].upstream, for pickUpstream()
};

class Catalog {
 public:
  // Throws std::invalid_argument for a base_url that does not parse.
  explicit Catalog(const std::vector<config::Upstream>& upstreams);

  const std::vector<UpstreamInfo>& upstreams() const { return upstreams_; }
  const std::vector<ModelRoute>& routes() const { return routes_; }
  // nullptr when no upstream maps `model`.
  const ModelRoute* route(std::string_view model) const;

 private:
  std::vector<UpstreamInfo> upstreams_;
  std::vector<ModelRoute> routes_;  // sorted by model id (binary search)
};

}  // namespace relay::upstream
