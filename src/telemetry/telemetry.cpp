#include "relay/telemetry/telemetry.hpp"

#include <algorithm>
#include <array>
#include <chrono>

#include "families.hpp"
#include "relay/telemetry/access_log.hpp"
#include "relay/telemetry/live_stats.hpp"
#include "relay/telemetry/metrics.hpp"
#include "series_cache.hpp"

namespace relay::telemetry {
namespace {

namespace pm = prometheus;

constexpr std::size_t kFailures = static_cast<std::size_t>(UpstreamFailure::kCount);
constexpr std::size_t kKinds = static_cast<std::size_t>(FallbackKind::kCount);
constexpr std::size_t kEjections = static_cast<std::size_t>(EjectionReason::kCount);
constexpr std::string_view kDirections[] = {"input", "cached", "output"};

constexpr std::uint64_t kMarker = 1ULL << 63;  // keeps every packed key nonzero

// Ids as stored in a packed key: 0 = none, id + 1 otherwise.
std::uint64_t field(std::uint32_t id) {
  return id == kNone ? 0 : std::uint64_t{id} + 1;
}
std::uint32_t validStatus(int status) {
  return status >= 100 && status <= 599 ? static_cast<std::uint32_t>(status) : 0;
}

// Bits: node 0-7, status 8-17, upstream 18-27, model 28-39, key 40-59. The
// widths are LabelSpace's limits, so fields never overlap.
std::uint64_t packRequest(std::uint32_t key, std::uint32_t model, std::uint32_t upstream,
                          std::uint32_t status, std::uint32_t node) {
  return kMarker | field(key) << 40 | field(model) << 28 | field(upstream) << 18 |
         std::uint64_t{status} << 8 | node;
}

// Bits: status 0-9, method 10-19, server 20-39, key 40-59.
std::uint64_t packMcp(std::uint32_t key, std::uint32_t server, McpMethod method,
                      std::uint32_t status) {
  return kMarker | field(key) << 40 | field(server) << 20 |
         std::uint64_t{static_cast<std::uint8_t>(method)} << 10 | status;
}

std::string str(std::string_view v) {
  return std::string(v);
}

bool usesTokens(const Usage& u) {
  return u.promptTokens > 0 || u.completionTokens > 0;
}

std::uint64_t micros(std::int64_t us) {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(us, 0));
}

}  // namespace

// Every series one (key, model, upstream, status, node) combination touches.
// Token, cost and upstream series are null when no upstream was reached.
struct Telemetry::Series {
  pm::Counter* requests = nullptr;
  std::array<pm::Counter*, 3> tokens{};
  std::array<pm::Counter*, 3> estimated{};
  std::atomic<std::uint64_t>* cost = nullptr;
  pm::Counter* unpriced = nullptr;
  detail::LatencyHistogram* duration = nullptr;
  detail::LatencyHistogram* ttft = nullptr;
  detail::LatencyHistogram* upstream = nullptr;
  detail::WindowQuantiles* durationWindow = nullptr;
  detail::WindowQuantiles* ttftWindow = nullptr;
  const Price* price = nullptr;  // into prices_; null = unpriced
  LiveCells live;                // the console's cells (all null without LiveStats)
};

struct Telemetry::McpSeries {
  pm::Counter* requests = nullptr;
  detail::LatencyHistogram* duration = nullptr;
};

// Event series resolved eagerly for every configured upstream, so they exist
// (at 0) from the first scrape. Indexed by upstream id; fallbacks by id + 1,
// with 0 for "none" (a model fallback when no upstream could be tried).
struct Telemetry::Events {
  std::vector<std::array<pm::Counter*, kFailures>> retries;
  std::vector<std::array<std::array<pm::Counter*, kFailures>, kKinds>> fallbacks;
  std::vector<std::array<pm::Counter*, kEjections>> ejections;
  std::vector<pm::Gauge*> health;
  std::vector<pm::Gauge*> mcpStreams;       // by MCP server id
  std::vector<detail::LiveUpstream*> live;  // by upstream id; empty without LiveStats
};

struct Telemetry::Caches {
  detail::SeriesCache<Series> requests{8192};
  detail::SeriesCache<McpSeries> mcp{1024};
};

Telemetry::Telemetry(Metrics& metrics, AccessLog* accessLog, const config::Config& cfg,
                     std::vector<std::string> nodeIds, LiveStats* live)
    : metrics_(metrics),
      log_(accessLog),
      live_(live),
      labels_(cfg, std::move(nodeIds)),
      prices_(cfg.prices),
      currency_(cfg.currency),
      events_(std::make_unique<Events>()),
      caches_(std::make_unique<Caches>()) {
  detail::Families& f = metrics_.families();
  auto failure = [](std::size_t r) { return str(detail::failureLabel(UpstreamFailure(r))); };
  // Slot 0 of fallbacks is "none", then one per configured upstream.
  for (std::size_t i = 0; i <= labels_.upstreams().size(); ++i) {
    const std::string up = i == 0 ? str(kNoneLabel) : labels_.upstreams()[i - 1];
    auto& fallback = events_->fallbacks.emplace_back();
    for (std::size_t k = 0; k < kKinds; ++k) {
      const std::string kind = str(detail::fallbackKindLabel(FallbackKind(k)));
      for (std::size_t r = 0; r < kFailures; ++r) {
        fallback[k][r] =
            &f.fallbacks.Add({{"upstream", up}, {"kind", kind}, {"reason", failure(r)}});
      }
    }
  }
  for (const std::string& up : labels_.upstreams()) {
    auto& retry = events_->retries.emplace_back();
    for (std::size_t r = 0; r < kFailures; ++r) {
      retry[r] = &f.retries.Add({{"upstream", up}, {"reason", failure(r)}});
    }
    auto& ejection = events_->ejections.emplace_back();
    for (std::size_t r = 0; r < kEjections; ++r) {
      ejection[r] = &f.ejections.Add(
          {{"upstream", up}, {"reason", str(detail::ejectionLabel(EjectionReason(r)))}});
    }
    events_->health.push_back(&f.health.Add({{"upstream", up}}));
    if (live_) events_->live.push_back(live_->upstreamCell(up));
  }
  for (const std::string& server : labels_.mcpServers()) {
    events_->mcpStreams.push_back(&f.mcpStreams.Add({{"server", server}}));
  }
}

Telemetry::~Telemetry() = default;

const Telemetry::Series& Telemetry::seriesFor(const RequestRecord& r) {
  const std::uint32_t key = labels_.keyOf(r.keyId, r.keyName);
  const std::uint32_t model = r.fallbackModel.empty() && r.fallbackModelId == kNone
                                  ? labels_.modelOf(r.modelId, r.model)
                                  : labels_.modelOf(r.fallbackModelId, r.fallbackModel);
  const std::uint32_t upstream = labels_.upstreamOf(r.upstreamId, r.upstream);
  const std::uint32_t status = validStatus(r.status);
  const std::uint32_t node = std::min(r.nodeId, labels_.nodeCount() - 1);
  return caches_->requests.get(packRequest(key, model, upstream, status, node), [&] {
    detail::Families& f = metrics_.families();
    const std::string keyL = str(labels_.keyLabel(key)), modelL = str(labels_.modelLabel(model)),
                      upL = str(labels_.upstreamLabel(upstream)),
                      nodeL = str(labels_.nodeLabel(node)),
                      regionL = str(labels_.regionLabel(upstream));
    Series out;
    out.requests = &f.requests.Add({{"key", keyL},
                                    {"model", modelL},
                                    {"upstream", upL},
                                    {"region", regionL},
                                    {"code", statusLabel(r.status)},
                                    {"node", nodeL}});
    // Per swarm node too (the bounded node label): p50/p95/p99 per node, and
    // per region of the answering upstream.
    out.duration = &f.duration.add({{"model", modelL}, {"node", nodeL}, {"region", regionL}});
    out.ttft = &f.ttft.add({{"model", modelL}, {"node", nodeL}, {"region", regionL}});
    out.durationWindow = &f.durationWindow.add({{"model", modelL}, {"node", nodeL}});
    out.ttftWindow = &f.ttftWindow.add({{"model", modelL}, {"node", nodeL}});
    if (live_) {
      out.live = live_->cells(
          key == kNone ? std::string_view() : labels_.keyLabel(key),
          upstream == kNone ? std::string_view() : labels_.upstreamLabel(upstream), nodeL);
    }
    if (upstream == kNone) return out;  // no tokens, cost or upstream latency without one
    for (std::size_t d = 0; d < 3; ++d) {
      const std::string dir = str(kDirections[d]);
      out.tokens[d] = &f.tokens.Add({{"key", keyL},
                                     {"model", modelL},
                                     {"upstream", upL},
                                     {"direction", dir},
                                     {"node", nodeL}});
      out.estimated[d] =
          &f.tokensEstimated.Add({{"model", modelL}, {"upstream", upL}, {"direction", dir}});
    }
    out.cost = &f.cost.add({{"key", keyL}, {"model", modelL}, {"upstream", upL}, {"node", nodeL}});
    out.unpriced = &f.unpriced.Add({{"model", modelL}, {"upstream", upL}});
    out.upstream = &f.upstreamLatency.add({{"upstream", upL}, {"model", modelL}});
    out.price = model == kNone ? nullptr : prices_.find(modelL, upL);
    return out;
  });
}

Settlement Telemetry::record(const RequestRecord& r) {
  const Series& s = seriesFor(r);
  const std::int64_t prompt = std::max<std::int64_t>(r.usage.promptTokens, 0);
  const std::int64_t cached = std::clamp<std::int64_t>(r.usage.cachedTokens, 0, prompt);
  const std::int64_t counts[3] = {prompt - cached, cached,
                                  std::max<std::int64_t>(r.usage.completionTokens, 0)};
  const bool usedTokens = usesTokens(r.usage);

  Settlement out;
  if (s.price) {
    out.cost = costOf(*s.price, r.usage);
  } else {
    out.priced = !usedTokens;
  }

  s.requests->Increment();
  if (s.cost && usedTokens) {
    for (std::size_t d = 0; d < 3; ++d) {
      if (counts[d] == 0) continue;
      s.tokens[d]->Increment(static_cast<double>(counts[d]));
      if (r.usageEstimated) s.estimated[d]->Increment(static_cast<double>(counts[d]));
    }
    if (out.cost.picoUsd) s.cost->fetch_add(out.cost.picoUsd, std::memory_order_relaxed);
    if (!out.priced) s.unpriced->Increment();
  }
  const std::int64_t nowMs = detail::coarseNowMs();
  s.duration->observe(micros(r.durationUs));
  s.durationWindow->observe(micros(r.durationUs), nowMs);
  if (r.ttftUs >= 0) {
    s.ttft->observe(micros(r.ttftUs));
    s.ttftWindow->observe(micros(r.ttftUs), nowMs);
  }
  if (r.upstreamUs >= 0 && s.upstream) s.upstream->observe(micros(r.upstreamUs));
  if (r.overheadUs >= 0) metrics_.families().overheadSeconds.observe(micros(r.overheadUs));
  if (live_) live_->record(s.live, r, out.cost, nowMs);

  if (log_) {
    thread_local std::string line;  // reused: no allocation per request once warm
    line.clear();
    const std::uint32_t node = std::min(r.nodeId, labels_.nodeCount() - 1);
    appendAccessLine(line, r, out, labels_.nodeLabel(node), currency_,
                     std::chrono::system_clock::now());
    log_->write(line);
  }
  return out;
}

// Event calls with an id this config does not know count nothing (retries,
// ejections, health) or count under "none" (fallbacks): ids come from the
// pipeline's own snapshot, so this only guards against misuse.
void Telemetry::retry(std::uint32_t upstreamId, UpstreamFailure why) {
  if (upstreamId >= events_->retries.size()) return;
  events_->retries[upstreamId][std::min(static_cast<std::size_t>(why), kFailures - 1)]->Increment();
}

void Telemetry::attempt(std::uint32_t upstreamId, bool failed) {
  if (upstreamId >= events_->live.size()) return;
  live_->attempt(events_->live[upstreamId], failed, detail::coarseNowMs());
}

void Telemetry::fallback(std::uint32_t fromUpstreamId, FallbackKind kind, UpstreamFailure why) {
  const std::size_t slot = fromUpstreamId < events_->health.size() ? fromUpstreamId + 1 : 0;
  const auto k = std::min(static_cast<std::size_t>(kind), kKinds - 1);
  const auto r = std::min(static_cast<std::size_t>(why), kFailures - 1);
  events_->fallbacks[slot][k][r]->Increment();
}

void Telemetry::ejection(std::uint32_t upstreamId, EjectionReason why) {
  if (upstreamId >= events_->ejections.size()) return;
  const auto r = std::min(static_cast<std::size_t>(why), kEjections - 1);
  events_->ejections[upstreamId][r]->Increment();
}

void Telemetry::refusal(RefusalReason why) {
  auto& refusals = metrics_.families().refusals;
  refusals[std::min(static_cast<std::size_t>(why), refusals.size() - 1)]->Increment();
}

HealthState Telemetry::upstreamHealth(std::uint32_t upstreamId, HealthState state) {
  if (upstreamId >= events_->health.size()) return state;
  pm::Gauge& g = *events_->health[upstreamId];
  auto previous = static_cast<HealthState>(static_cast<int>(g.Value()));
  g.Set(static_cast<double>(static_cast<int>(state)));
  return previous;
}

void Telemetry::recordMcp(const McpRecord& r) {
  const std::uint32_t key = labels_.keyOf(r.keyId, r.keyName);
  const std::uint32_t server = labels_.mcpServerOf(r.serverId, r.server);
  const McpMethod method = r.method < McpMethod::kCount ? r.method : McpMethod::kOther;
  const std::uint32_t status = validStatus(r.status);
  const McpSeries& m = caches_->mcp.get(packMcp(key, server, method, status), [&] {
    detail::Families& f = metrics_.families();
    const std::string methodL = str(mcpMethodLabel(method));
    return McpSeries{&f.mcpRequests.Add({{"key", str(labels_.keyLabel(key))},
                                         {"server", str(labels_.mcpServerLabel(server))},
                                         {"method", methodL},
                                         {"code", statusLabel(r.status)}}),
                     &f.mcpDuration.add({{"method", methodL}})};
  });
  m.requests->Increment();
  m.duration->observe(micros(r.durationUs));
}

void Telemetry::mcpStreamOpened(std::uint32_t serverId) {
  if (serverId < events_->mcpStreams.size()) events_->mcpStreams[serverId]->Increment();
}

void Telemetry::mcpStreamClosed(std::uint32_t serverId) {
  if (serverId < events_->mcpStreams.size()) events_->mcpStreams[serverId]->Decrement();
}

}  // namespace relay::telemetry
