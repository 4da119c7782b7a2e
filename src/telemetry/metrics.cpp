#include "relay/telemetry/metrics.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "families.hpp"
#include "relay/common/limits.hpp"
#include "relay/common/memory_stats.hpp"
#include "relay/common/shared_state_stats.hpp"

namespace relay::telemetry {
namespace {

namespace pm = prometheus;

// m × 10^e for the mantissas 100..800 (read as 1.00..8.00), from `fromExp`
// to `toValue`. Integers divided by an exact power of ten give the double
// nearest each decimal bound, so the exposition prints "0.00125", not a
// binary approximation of it.
std::vector<double> decadeBuckets(int fromExp, double toValue) {
  static constexpr int kMantissas[] = {100, 125, 150, 200, 250, 300, 400, 500, 600, 800};
  std::vector<double> out;
  for (int e = fromExp;; ++e) {
    for (int m : kMantissas) {
      int shift = e - 2;  // m is 100× the mantissa
      double v = m;
      for (int i = 0; i < shift; ++i)
        v *= 10;
      double div = 1;
      for (int i = 0; i < -shift; ++i)
        div *= 10;
      v /= div;
      if (v > toValue * (1 + 1e-12)) return out;
      out.push_back(v);
    }
  }
}

template <class T>
pm::Family<T>& family(pm::detail::Builder<T> builder, pm::Registry& registry, const char* name,
                      const char* help) {
  return builder.Name(name).Help(help).Register(registry);
}

constexpr std::string_view kFailureLabels[] = {"connect_error", "timeout", "rate_limited",
                                               "server_error",  "reset",   "other"};
constexpr std::string_view kFallbackLabels[] = {"upstream", "model"};
constexpr std::string_view kEjectionLabels[] = {"consecutive_failures", "active_check",
                                                "credential_refused", "other"};
constexpr std::string_view kRefusalLabels[] = {
    "requests",          "tokens",       "concurrency", "budget",
    "upstream_capacity", "retry_budget", "other",       "shared_state"};
constexpr std::string_view kReloadLabels[] = {"success", "failure"};
static_assert(std::size(kFailureLabels) == static_cast<std::size_t>(UpstreamFailure::kCount));
static_assert(std::size(kFallbackLabels) == static_cast<std::size_t>(FallbackKind::kCount));
static_assert(std::size(kEjectionLabels) == static_cast<std::size_t>(EjectionReason::kCount));
static_assert(std::size(kRefusalLabels) == static_cast<std::size_t>(RefusalReason::kCount));
static_assert(std::size(kReloadLabels) == static_cast<std::size_t>(ReloadOutcome::kCount));

template <std::size_t N, class E>
std::string_view pick(const std::string_view (&labels)[N], E e) {
  auto i = static_cast<std::size_t>(e);
  return i < N ? labels[i] : labels[N - 1];
}

}  // namespace

std::vector<double> latencyBuckets() {
  return decadeBuckets(-3, 600);
}
std::vector<double> overheadBuckets() {
  return decadeBuckets(-5, 0.1);
}

namespace detail {

std::string_view failureLabel(UpstreamFailure f) {
  return pick(kFailureLabels, f);
}
std::string_view fallbackKindLabel(FallbackKind k) {
  return pick(kFallbackLabels, k);
}
std::string_view ejectionLabel(EjectionReason r) {
  return pick(kEjectionLabels, r);
}
std::string_view refusalLabel(RefusalReason r) {
  return pick(kRefusalLabels, r);
}

std::atomic<std::uint64_t>& ExactUsdCounter::add(const pm::Labels& labels) {
  std::lock_guard lock(mutex_);
  auto it = byLabels_.find(labels);
  if (it != byLabels_.end()) return it->second->picoUsd;
  Cell& cell = cells_.emplace_back();
  cell.labels = labels;
  byLabels_.emplace(labels, &cell);
  return cell.picoUsd;
}

namespace {
// Label values escaped as the text format requires: \\, \" and \n.
void appendLabelValue(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
}
}  // namespace

void ExactUsdCounter::serialize(std::string& out) const {
  // HELP text is fixed ASCII without backslashes or newlines: no escaping.
  out.append("# HELP ").append(name_).append(" ").append(help_).append("\n");
  out.append("# TYPE ").append(name_).append(" counter\n");
  std::lock_guard lock(mutex_);
  for (const Cell& cell : cells_) {
    out.append(name_);
    char sep = '{';
    for (const auto& [name, value] : cell.labels) {
      out.push_back(sep);
      out.append(name).append("=\"");
      appendLabelValue(out, value);
      out.push_back('"');
      sep = ',';
    }
    if (sep == ',') out.push_back('}');
    out.push_back(' ');
    appendUsd(out, Cost{cell.picoUsd.load(std::memory_order_relaxed)});
    out.push_back('\n');
  }
}

Families::Families()
    : latency(latencyBuckets()),
      overhead(overheadBuckets()),
      requests(family(pm::BuildCounter(), registry, "kimi_relay_requests_total",
                      "Requests settled, by key, model, upstream, response status code and node.")),
      tokens(family(pm::BuildCounter(), registry, "kimi_relay_tokens_total",
                    "Tokens by direction: input (uncached prompt), cached (prompt served from "
                    "cache), output (completion). Includes estimated usage.")),
      tokensEstimated(family(pm::BuildCounter(), registry, "kimi_relay_tokens_estimated_total",
                             "The part of kimi_relay_tokens_total that was estimated because the "
                             "upstream reported no usage.")),
      unpriced(family(pm::BuildCounter(), registry, "kimi_relay_unpriced_requests_total",
                      "Requests that used tokens but matched no price row (cost counted as 0).")),
      cost("kimi_relay_cost_usd_total", "Cost in USD from the configured price table."),
      duration(
          "kimi_relay_request_duration_seconds",
          "Request duration, head received to response finished, by served model and swarm node.",
          latency),
      ttft(
          "kimi_relay_time_to_first_token_seconds",
          "Time from request head to the first content byte sent to the caller, by model and node.",
          latency),
      upstreamLatency("kimi_relay_upstream_latency_seconds",
                      "Upstream latency: request sent to response head, final attempt.", latency),
      durationWindow("kimi_relay_request_duration_window_seconds",
                     "Request duration p50/p95/p99 over the last 60 s (within 1.6%), by served "
                     "model and node."),
      ttftWindow("kimi_relay_time_to_first_token_window_seconds",
                 "Time-to-first-token p50/p95/p99 over the last 60 s (within 1.6%), by served "
                 "model and node."),
      overheadFamily("kimi_relay_gateway_overhead_seconds",
                     "Time the gateway spent on a request other than waiting for the upstream.",
                     overhead),
      overheadSeconds(overheadFamily.add({})),
      retries(family(pm::BuildCounter(), registry, "kimi_relay_retries_total",
                     "Upstream attempts retried, by the upstream that failed and why.")),
      fallbacks(family(pm::BuildCounter(), registry, "kimi_relay_fallbacks_total",
                       "Requests moved to another upstream or a fallback model, by the upstream "
                       "left and why.")),
      ejections(family(pm::BuildCounter(), registry, "kimi_relay_upstream_ejections_total",
                       "Upstreams ejected by the circuit breaker, by reason.")),
      health(family(pm::BuildGauge(), registry, "kimi_relay_upstream_health_state",
                    "Upstream health: 0 healthy, 1 half-open, 2 ejected.")),
      inFlight(family(pm::BuildGauge(), registry, "kimi_relay_in_flight_requests",
                      "Requests being served.")
                   .Add({})),
      lastReload(family(pm::BuildGauge(), registry,
                        "kimi_relay_config_last_reload_success_timestamp_seconds",
                        "Unix time of the last successful config load (start-up or reload).")
                     .Add({})),
      mcpRequests(family(pm::BuildCounter(), registry, "kimi_relay_mcp_requests_total",
                         "MCP HTTP requests by key, server, method and response status code.")),
      mcpDuration("kimi_relay_mcp_request_duration_seconds", "MCP request latency by method.",
                  latency),
      mcpStreams(family(pm::BuildGauge(), registry, "kimi_relay_mcp_open_streams",
                        "Open MCP server-to-client SSE streams by server.")) {
  lastReload.SetToCurrentTime();  // a process starts from a config that loaded
  auto& refusalFamily = family(pm::BuildCounter(), registry, "kimi_relay_rate_limit_refusals_total",
                               "Requests refused by admission or capacity limits, by reason.");
  for (std::size_t i = 0; i < refusals.size(); ++i) {
    refusals[i] = &refusalFamily.Add({{"reason", std::string(kRefusalLabels[i])}});
  }
  auto& reloadFamily = family(pm::BuildCounter(), registry, "kimi_relay_config_reloads_total",
                              "Config loads after start-up, by outcome.");
  for (std::size_t i = 0; i < reloads.size(); ++i) {
    reloads[i] = &reloadFamily.Add({{"outcome", std::string(kReloadLabels[i])}});
  }
}

}  // namespace detail

Metrics::Metrics() : families_(std::make_unique<detail::Families>()) {}
Metrics::~Metrics() = default;

namespace {

// The bounds' counters live in common/limits (every module counts there);
// they are read at scrape time.
pm::MetricFamily limitHitsFamily() {
  pm::MetricFamily f;
  f.name = "kimi_relay_limit_hits_total";
  f.help =
      "Times a configured bound refused, cut or dropped something, by limit (docs/configuration.md "
      "lists each).";
  f.type = pm::MetricType::Counter;
  for (std::size_t i = 0; i < static_cast<std::size_t>(Limit::kCount); ++i) {
    auto limit = static_cast<Limit>(i);
    pm::ClientMetric m;
    m.label.push_back({"limit", std::string(limitName(limit))});
    m.counter.value = static_cast<double>(limitCount(limit));
    f.metric.push_back(std::move(m));
  }
  return f;
}

// A family of one series without labels, its value read at scrape time.
pm::MetricFamily oneSeries(std::string name, std::string help, pm::MetricType type, double value) {
  pm::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  pm::ClientMetric& m = f.metric.emplace_back();
  if (type == pm::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return f;
}

// The process's memory (common/memory_stats.hpp) and its open connections.
void processFamilies(std::vector<pm::MetricFamily>& all) {
  all.push_back(
      oneSeries("kimi_relay_open_connections", "Client connections open on every listener.",
                pm::MetricType::Gauge,
                static_cast<double>(openClientConnections().load(std::memory_order_relaxed))));
  all.push_back(oneSeries("kimi_relay_resident_memory_bytes",
                          "The process's resident set (VmRSS), read at scrape time.",
                          pm::MetricType::Gauge, static_cast<double>(residentBytes())));
  all.push_back(oneSeries("kimi_relay_memory_sweeps_total",
                          "Times a worker that went idle after load swept its heap (with "
                          "mimalloc 2.0, what the load left in it goes back to the system).",
                          pm::MetricType::Counter, static_cast<double>(memorySweeps())));
}

// The shared-state store's series (common/shared_state_stats.hpp), present
// only when cluster.redis_url is set.
void sharedStateFamilies(std::vector<pm::MetricFamily>& all) {
  const SharedStateStats& s = sharedStateStats();
  const std::int32_t workers = s.workers.load(std::memory_order_relaxed);
  if (workers <= 0) return;
  auto gauge = [&](std::string name, std::string help, double value) {
    all.push_back(oneSeries(std::move(name), std::move(help), pm::MetricType::Gauge, value));
  };
  const std::int32_t up = s.connections.load(std::memory_order_relaxed);
  gauge("kimi_relay_redis_up",
        "1 when every worker's connection to the shared-state Redis is ready, else 0.",
        up >= workers ? 1 : 0);
  gauge("kimi_relay_redis_connections", "Workers whose connection to Redis is ready.", up);
  gauge("kimi_relay_redis_settlements_queued",
        "Settlements waiting for Redis to come back (replayed in order when it does).",
        static_cast<double>(s.settlementsQueued.load(std::memory_order_relaxed)));

  auto counter = [&](std::string name, std::string help, std::string label, auto&& values) {
    pm::MetricFamily f;
    f.name = std::move(name);
    f.help = std::move(help);
    f.type = pm::MetricType::Counter;
    for (auto& [value, count] : values) {
      pm::ClientMetric m;
      if (!label.empty()) m.label.push_back({label, std::string(value)});
      m.counter.value = static_cast<double>(count);
      f.metric.push_back(std::move(m));
    }
    all.push_back(std::move(f));
  };
  std::vector<std::pair<std::string_view, std::uint64_t>> errors, fallbacks, dropped;
  for (std::size_t i = 0; i < static_cast<std::size_t>(RedisErrorKind::kCount); ++i)
    errors.emplace_back(redisErrorName(static_cast<RedisErrorKind>(i)),
                        s.errors[i].load(std::memory_order_relaxed));
  for (std::size_t i = 0; i < static_cast<std::size_t>(RedisFallback::kCount); ++i)
    fallbacks.emplace_back(redisFallbackName(static_cast<RedisFallback>(i)),
                           s.fallbacks[i].load(std::memory_order_relaxed));
  dropped.emplace_back("", s.settlementsDropped.load(std::memory_order_relaxed));
  counter("kimi_relay_redis_errors_total", "Redis calls that failed, by kind.", "kind", errors);
  counter("kimi_relay_redis_fallbacks_total",
          "Requests decided without Redis, by cluster.on_redis_failure mode.", "mode", fallbacks);
  counter("kimi_relay_redis_settlements_dropped_total",
          "Settlements lost because the queue for an absent Redis was full.", "", dropped);

  pm::MetricFamily h;
  h.name = "kimi_relay_redis_call_duration_seconds";
  h.help = "Round trip of an admission call to Redis.";
  h.type = pm::MetricType::Histogram;
  pm::ClientMetric m;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= kRedisLatencyBounds.size(); ++i) {
    cumulative += s.latency[i].load(std::memory_order_relaxed);
    pm::ClientMetric::Bucket b;
    b.cumulative_count = cumulative;
    b.upper_bound = i < kRedisLatencyBounds.size() ? kRedisLatencyBounds[i]
                                                   : std::numeric_limits<double>::infinity();
    m.histogram.bucket.push_back(b);
  }
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum =
      static_cast<double>(s.latencySumNs.load(std::memory_order_relaxed)) / 1e9;
  h.metric.push_back(std::move(m));
  all.push_back(std::move(h));
}

}  // namespace

std::string Metrics::expose() const {
  std::vector<pm::MetricFamily> all = families_->registry.Collect();
  const std::int64_t now = detail::coarseNowMs();
  // A histogram family with no series yet is left out, as the registry
  // leaves out its own empty families.
  for (const detail::HistogramFamily* h :
       {&families_->duration, &families_->ttft, &families_->upstreamLatency,
        &families_->overheadFamily, &families_->mcpDuration}) {
    pm::MetricFamily f = h->collect();
    if (!f.metric.empty()) all.push_back(std::move(f));
  }
  all.push_back(families_->durationWindow.collect(now));
  all.push_back(families_->ttftWindow.collect(now));
  all.push_back(limitHitsFamily());
  processFamilies(all);
  sharedStateFamilies(all);
  std::sort(all.begin(), all.end(),
            [](const pm::MetricFamily& a, const pm::MetricFamily& b) { return a.name < b.name; });
  std::ostringstream out;
  const pm::TextSerializer serializer;
  std::string cost;
  families_->cost.serialize(cost);
  bool costWritten = false;
  std::vector<pm::MetricFamily> one(1);
  for (pm::MetricFamily& family : all) {
    if (!costWritten && families_->cost.name() < family.name) {
      out << cost;
      costWritten = true;
    }
    one[0] = std::move(family);
    serializer.Serialize(out, one);
  }
  if (!costWritten) out << cost;
  return std::move(out).str();
}

void Metrics::requestStarted() {
  families_->inFlight.Increment();
}
void Metrics::requestFinished() {
  families_->inFlight.Decrement();
}

void Metrics::configReload(ReloadOutcome outcome) {
  auto i = static_cast<std::size_t>(outcome);
  if (i >= families_->reloads.size()) return;
  families_->reloads[i]->Increment();
  if (outcome == ReloadOutcome::kSuccess) families_->lastReload.SetToCurrentTime();
}

}  // namespace relay::telemetry
