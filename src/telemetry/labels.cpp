#include "relay/telemetry/labels.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace relay::telemetry {
namespace {

// Bit budget of the packed series key (see telemetry.cpp).
constexpr std::size_t kMaxKeys = (1u << 20) - 1;
constexpr std::size_t kMaxModels = (1u << 12) - 1;
constexpr std::size_t kMaxUpstreams = (1u << 10) - 1;
constexpr std::size_t kMaxNodeIds = 254;  // + "none" and "other" in 8 bits

void checkSize(const char* what, std::size_t n, std::size_t max) {
  if (n > max) {
    throw std::invalid_argument(std::string("telemetry: too many ") + what + " (" +
                                std::to_string(n) + " > " + std::to_string(max) + ")");
  }
}

}  // namespace

std::string statusLabel(int status) {
  if (status < 100 || status > 599) return std::string(kNoneLabel);
  return std::to_string(status);
}

LabelSpace::LabelSpace(const config::Config& cfg, std::vector<std::string> nodeIds) {
  keys_.reserve(cfg.keys.size());
  for (const config::Key& k : cfg.keys)
    keys_.push_back(k.name);
  std::set<std::string> models;  // sorted and unique, as upstream::Catalog orders its routes
  for (const config::Upstream& u : cfg.upstreams) {
    upstreams_.push_back(u.name);
    regions_.push_back(u.region.empty() ? std::string(kNoneLabel) : u.region);
    for (const auto& entry : u.models)
      models.insert(entry.first);
  }
  models_.assign(models.begin(), models.end());
  for (const config::McpServer& s : cfg.mcp.servers)
    mcpServers_.push_back(s.name);
  // Empty ids could never match a present header; duplicates add nothing.
  std::erase(nodeIds, std::string());
  std::sort(nodeIds.begin(), nodeIds.end());
  nodeIds.erase(std::unique(nodeIds.begin(), nodeIds.end()), nodeIds.end());
  nodeIds_ = std::move(nodeIds);

  checkSize("keys", keys_.size(), kMaxKeys);
  checkSize("models", models_.size(), kMaxModels);
  checkSize("upstreams", upstreams_.size(), kMaxUpstreams);
  checkSize("node ids", nodeIds_.size(), kMaxNodeIds);
  checkSize("MCP servers", mcpServers_.size(), kMaxUpstreams);

  keyIndex_ = buildIndex(keys_);
  modelIndex_ = buildIndex(models_);
  upstreamIndex_ = buildIndex(upstreams_);
  mcpIndex_ = buildIndex(mcpServers_);
  nodeIndex_ = buildIndex(nodeIds_);
}

std::uint32_t LabelSpace::nodeId(std::string_view headerValue) const {
  if (headerValue.empty()) return 0;
  std::uint32_t i = find(nodeIndex_, headerValue);
  return i == kNone ? static_cast<std::uint32_t>(nodeIds_.size()) + 1 : i + 1;
}

std::string_view LabelSpace::nodeLabel(std::uint32_t id) const {
  if (id == 0 || id == kNone) return kNoneLabel;
  if (id <= nodeIds_.size()) return nodeIds_[id - 1];
  return kOtherLabel;
}

LabelSpace::Index LabelSpace::buildIndex(const std::vector<std::string>& names) {
  Index index;
  index.reserve(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    index.push_back(Entry{names[i], static_cast<std::uint32_t>(i)});
  }
  // Stable: with duplicate names (the config refuses them) the first one wins.
  std::stable_sort(index.begin(), index.end(),
                   [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return index;
}

std::uint32_t LabelSpace::find(const Index& index, std::string_view name) {
  auto it = std::lower_bound(index.begin(), index.end(), name,
                             [](const Entry& e, std::string_view n) { return e.name < n; });
  return it != index.end() && it->name == name ? it->id : kNone;
}

std::string_view LabelSpace::label(const std::vector<std::string>& names, std::uint32_t id) {
  return id < names.size() ? std::string_view(names[id]) : kNoneLabel;
}

std::uint32_t LabelSpace::resolve(const std::vector<std::string>& names, const Index& index,
                                  std::uint32_t id, std::string_view name) {
  if (id < names.size() && (name.empty() || names[id] == name)) return id;
  return name.empty() ? kNone : find(index, name);
}

}  // namespace relay::telemetry
