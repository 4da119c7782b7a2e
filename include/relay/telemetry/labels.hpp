// Label values of the gateway's metrics, and the small integer ids that stand
// for them on the hot path.
//
// Invariant: every label value comes from the config (key, model, upstream,
// MCP server and node names) or from a fixed set in this module — never from
// caller input — so the number of series is bounded by the config. Anything a
// caller sends that is not configured maps to "none" or "other".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "relay/config/config.hpp"

namespace relay::telemetry {

// "Not known / not reached" for any id (no key before authentication, no
// upstream before routing, a model the config does not serve).
inline constexpr std::uint32_t kNone = 0xffff'ffffu;

inline constexpr std::string_view kNoneLabel = "none";
inline constexpr std::string_view kOtherLabel = "other";

// Status code label: "100".."599", else "none" (no response was sent).
std::string statusLabel(int status);

// The names one config gives each id space. Index conventions match the rest
// of the gateway, so the pipeline can pass the ids it already has:
//   key      position in config.keys (admission::Tenant::index)
//   model    position in the sorted set of client model ids of every
//            upstream's `models` map (upstream::Catalog::routes() order)
//   upstream position in config.upstreams (upstream::Candidate::upstream)
//   mcp      position in config.mcp.servers
//   node     0 = no X-Node-Id, 1..n = the configured node ids, n+1 = other
class LabelSpace {
 public:
  // Throws std::invalid_argument when an id space exceeds what the metric
  // cache can pack (2^20 keys, 4095 models, 1023 upstreams, 254 node ids).
  LabelSpace(const config::Config& cfg, std::vector<std::string> nodeIds);
  // The indexes hold views into the name vectors: not copyable or movable.
  LabelSpace(const LabelSpace&) = delete;
  LabelSpace& operator=(const LabelSpace&) = delete;

  const std::vector<std::string>& keys() const { return keys_; }
  const std::vector<std::string>& models() const { return models_; }
  const std::vector<std::string>& upstreams() const { return upstreams_; }
  const std::vector<std::string>& mcpServers() const { return mcpServers_; }
  const std::vector<std::string>& nodeIds() const { return nodeIds_; }

  // The id of a configured name, else kNone.
  std::uint32_t keyId(std::string_view name) const { return find(keyIndex_, name); }
  std::uint32_t modelId(std::string_view name) const { return find(modelIndex_, name); }
  std::uint32_t upstreamId(std::string_view name) const { return find(upstreamIndex_, name); }

  // The X-Node-Id header value → node id (see the conventions above).
  std::uint32_t nodeId(std::string_view headerValue) const;
  std::uint32_t nodeCount() const { return static_cast<std::uint32_t>(nodeIds_.size()) + 2; }

  // Label value of an id; "none" for kNone or an id out of range.
  std::string_view keyLabel(std::uint32_t id) const { return label(keys_, id); }
  std::string_view modelLabel(std::uint32_t id) const { return label(models_, id); }
  std::string_view upstreamLabel(std::uint32_t id) const { return label(upstreams_, id); }
  // The configured region of an upstream (upstreams[].region), "none" when
  // it has none or for kNone: bounded by the config like every label.
  std::string_view regionLabel(std::uint32_t upstreamId) const {
    return label(regions_, upstreamId);
  }
  std::string_view mcpServerLabel(std::uint32_t id) const { return label(mcpServers_, id); }
  std::string_view nodeLabel(std::uint32_t id) const;

  // Resolves an (id, name) pair as the pipeline hands it over: the id when it
  // names `name` or `name` is empty (the fast path: at most one string
  // compare), else the name's id — so an id from another config snapshot can
  // never mislabel a series — else kNone.
  std::uint32_t keyOf(std::uint32_t id, std::string_view name) const {
    return resolve(keys_, keyIndex_, id, name);
  }
  std::uint32_t modelOf(std::uint32_t id, std::string_view name) const {
    return resolve(models_, modelIndex_, id, name);
  }
  std::uint32_t upstreamOf(std::uint32_t id, std::string_view name) const {
    return resolve(upstreams_, upstreamIndex_, id, name);
  }
  std::uint32_t mcpServerOf(std::uint32_t id, std::string_view name) const {
    return resolve(mcpServers_, mcpIndex_, id, name);
  }

 private:
  struct Entry {
    std::string_view name;  // points into the owning vector
    std::uint32_t id;
  };
  using Index = std::vector<Entry>;  // sorted by name

  static Index buildIndex(const std::vector<std::string>& names);
  static std::uint32_t find(const Index& index, std::string_view name);
  static std::string_view label(const std::vector<std::string>& names, std::uint32_t id);
  static std::uint32_t resolve(const std::vector<std::string>& names, const Index& index,
                               std::uint32_t id, std::string_view name);

  std::vector<std::string> keys_, models_, upstreams_, mcpServers_, nodeIds_;
  std::vector<std::string> regions_;  // per upstream
  Index keyIndex_, modelIndex_, upstreamIndex_, mcpIndex_, nodeIndex_;
};

}  // namespace relay::telemetry
