#include "relay/telemetry/live_stats.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <limits>
#include <map>

#include "relay/telemetry/labels.hpp"
#include "relay/telemetry/sliding_sum.hpp"
#include "window_quantiles.hpp"

namespace relay::telemetry {

namespace detail {

// The last minute in 12 slices of 5 s (55-60 s of history); the last hour in
// 12 slices of 5 min.
using MinuteSum = SlidingSum<12, 5'000>;
using HourSum = SlidingSum<12, 300'000>;

struct LiveKey {
  MinuteSum requests, tokens;
  std::atomic<std::uint64_t> requestsTotal{0};
};

struct LiveUpstream {
  WindowQuantiles latency, ttft;
  MinuteSum requests, attempts, failedAttempts;
  HourSum picoUsd;
  std::atomic<std::uint64_t> requestsTotal{0};
  std::atomic<std::uint64_t> picoUsdTotal{0};
};

struct LiveNode {
  WindowQuantiles latency, ttft;
  MinuteSum requests;
  std::atomic<std::uint64_t> requestsTotal{0};
};

}  // namespace detail

namespace {

constexpr double kQuantiles[] = {0.5, 0.95, 0.99};

Percentiles percentiles(const detail::WindowQuantiles& w, std::int64_t nowMs) {
  std::array<double, 3> s{};
  w.quantiles(kQuantiles, nowMs, s);
  return Percentiles{s[0] * 1e3, s[1] * 1e3, s[2] * 1e3};  // seconds -> ms (NaN stays NaN)
}

std::uint64_t micros(std::int64_t us) {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(us, 0));
}

// A map of cells by name with a cap; cells never move or go away.
template <class Cell>
class CellMap {
 public:
  explicit CellMap(std::size_t cap) : cap_(cap) {}
  Cell* get(std::string_view name) {  // the owner's mutex held
    if (name.empty()) return nullptr;
    if (auto it = byName_.find(name); it != byName_.end()) return it->second;
    if (byName_.size() >= cap_) return nullptr;
    Cell& cell = cells_.emplace_back();
    byName_.emplace(std::string(name), &cell);
    return &cell;
  }
  const Cell* find(std::string_view name) const {
    auto it = byName_.find(name);
    return it == byName_.end() ? nullptr : it->second;
  }
  const std::map<std::string, Cell*, std::less<>>& byName() const { return byName_; }

 private:
  const std::size_t cap_;
  std::deque<Cell> cells_;  // deque: emplace_back never moves existing cells
  std::map<std::string, Cell*, std::less<>> byName_;
};

}  // namespace

struct LiveStats::Impl {
  mutable std::mutex mutex;  // the maps (not the cells' counters)
  CellMap<detail::LiveKey> keys{kMaxKeys};
  CellMap<detail::LiveUpstream> upstreams{kMaxUpstreams};
  CellMap<detail::LiveNode> nodes{kMaxNodes};

  detail::WindowQuantiles latency, ttft;
  std::atomic<std::uint64_t> requests{0}, errors{0}, picoUsd{0};

  mutable std::mutex historyMutex;
  std::array<HistoryPoint, kHistoryPoints> ring{};
  std::size_t next = 0, size = 0;
  std::int64_t lastSampleMs = 0;
};

LiveStats::LiveStats() : impl_(std::make_unique<Impl>()) {}

std::int64_t LiveStats::steadyNowMs() {
  return detail::coarseNowMs();
}
LiveStats::~LiveStats() = default;

LiveCells LiveStats::cells(std::string_view key, std::string_view upstream, std::string_view node) {
  std::lock_guard lock(impl_->mutex);
  return LiveCells{impl_->keys.get(key), impl_->upstreams.get(upstream), impl_->nodes.get(node)};
}

detail::LiveUpstream* LiveStats::upstreamCell(std::string_view name) {
  std::lock_guard lock(impl_->mutex);
  return impl_->upstreams.get(name);
}

void LiveStats::record(const LiveCells& c, const RequestRecord& r, const Cost& cost,
                       std::int64_t nowMs) {
  Impl& s = *impl_;
  const std::uint64_t pico = cost.picoUsd;
  s.requests.fetch_add(1, std::memory_order_relaxed);
  if (r.status >= 500 || r.status == 0) s.errors.fetch_add(1, std::memory_order_relaxed);
  if (pico) s.picoUsd.fetch_add(pico, std::memory_order_relaxed);
  s.latency.observe(micros(r.durationUs), nowMs);
  if (r.ttftUs >= 0) s.ttft.observe(micros(r.ttftUs), nowMs);
  if (detail::LiveKey* k = c.key) {
    k->requests.add(1, nowMs);
    const std::int64_t tokens = std::max<std::int64_t>(r.usage.promptTokens, 0) +
                                std::max<std::int64_t>(r.usage.completionTokens, 0);
    if (tokens > 0) k->tokens.add(static_cast<std::uint64_t>(tokens), nowMs);
    k->requestsTotal.fetch_add(1, std::memory_order_relaxed);
  }
  if (detail::LiveUpstream* u = c.upstream) {
    u->requests.add(1, nowMs);
    u->requestsTotal.fetch_add(1, std::memory_order_relaxed);
    u->latency.observe(micros(r.durationUs), nowMs);
    if (r.ttftUs >= 0) u->ttft.observe(micros(r.ttftUs), nowMs);
    if (pico) {
      u->picoUsd.add(pico, nowMs);
      u->picoUsdTotal.fetch_add(pico, std::memory_order_relaxed);
    }
  }
  if (detail::LiveNode* n = c.node) {
    n->requests.add(1, nowMs);
    n->requestsTotal.fetch_add(1, std::memory_order_relaxed);
    n->latency.observe(micros(r.durationUs), nowMs);
    if (r.ttftUs >= 0) n->ttft.observe(micros(r.ttftUs), nowMs);
  }
}

void LiveStats::attempt(detail::LiveUpstream* u, bool failed, std::int64_t nowMs) {
  if (!u) return;
  u->attempts.add(1, nowMs);
  if (failed) u->failedAttempts.add(1, nowMs);
}

KeyLive LiveStats::key(std::string_view name, std::int64_t nowMs) const {
  std::lock_guard lock(impl_->mutex);
  KeyLive out;
  if (const detail::LiveKey* k = impl_->keys.find(name)) {
    out.requestsLastMinute = k->requests.sum(nowMs);
    out.tokensLastMinute = k->tokens.sum(nowMs);
    out.requestsTotal = k->requestsTotal.load(std::memory_order_relaxed);
  }
  return out;
}

UpstreamLive LiveStats::upstream(std::string_view name, std::int64_t nowMs) const {
  const detail::LiveUpstream* u = nullptr;
  {
    std::lock_guard lock(impl_->mutex);
    u = impl_->upstreams.find(name);
  }
  UpstreamLive out;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out.latency = out.ttft = Percentiles{nan, nan, nan};
  if (!u) return out;  // cells never go away: safe to read without the lock
  out.latency = percentiles(u->latency, nowMs);
  out.ttft = percentiles(u->ttft, nowMs);
  out.requestsLastMinute = u->requests.sum(nowMs);
  out.attemptsLastMinute = u->attempts.sum(nowMs);
  out.failedAttemptsLastMinute = u->failedAttempts.sum(nowMs);
  out.requestsTotal = u->requestsTotal.load(std::memory_order_relaxed);
  out.costLastHour = Cost{u->picoUsd.sum(nowMs)};
  out.costTotal = Cost{u->picoUsdTotal.load(std::memory_order_relaxed)};
  return out;
}

std::vector<NodeLive> LiveStats::nodes(std::int64_t nowMs) const {
  std::vector<std::pair<std::string, const detail::LiveNode*>> cells;
  {
    std::lock_guard lock(impl_->mutex);
    for (const auto& [name, cell] : impl_->nodes.byName())
      cells.emplace_back(name, cell);
  }
  std::vector<NodeLive> out;
  out.reserve(cells.size());
  for (const auto& [name, n] : cells) {
    NodeLive v;
    v.node = name;
    v.latency = percentiles(n->latency, nowMs);
    v.ttft = percentiles(n->ttft, nowMs);
    v.requestsLastMinute = n->requests.sum(nowMs);
    v.requestsTotal = n->requestsTotal.load(std::memory_order_relaxed);
    out.push_back(std::move(v));
  }
  return out;
}

void LiveStats::sampleIfDue(std::int64_t unixMs, std::int64_t nowMs) {
  Impl& s = *impl_;
  std::lock_guard lock(s.historyMutex);
  if (s.size > 0 && nowMs - s.lastSampleMs < kSampleMs) return;
  HistoryPoint p;
  p.unixMs = unixMs;
  p.latency = percentiles(s.latency, nowMs);
  p.ttft = percentiles(s.ttft, nowMs);
  p.requests = s.requests.load(std::memory_order_relaxed);
  p.errors = s.errors.load(std::memory_order_relaxed);
  p.spend = Cost{s.picoUsd.load(std::memory_order_relaxed)};
  s.ring[s.next] = p;
  s.next = (s.next + 1) % kHistoryPoints;
  s.size = std::min(s.size + 1, kHistoryPoints);
  // Steps of exactly kSampleMs, so a late call does not shift every later sample.
  s.lastSampleMs =
      s.size == 1 || nowMs - s.lastSampleMs >= 2 * kSampleMs ? nowMs : s.lastSampleMs + kSampleMs;
}

std::vector<HistoryPoint> LiveStats::history() const {
  const Impl& s = *impl_;
  std::lock_guard lock(s.historyMutex);
  std::vector<HistoryPoint> out;
  out.reserve(s.size);
  std::size_t first = (s.next + kHistoryPoints - s.size) % kHistoryPoints;
  for (std::size_t i = 0; i < s.size; ++i)
    out.push_back(s.ring[(first + i) % kHistoryPoints]);
  return out;
}

}  // namespace relay::telemetry
