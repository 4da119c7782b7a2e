#include "relay/pipeline/active_health.hpp"

#include <map>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

namespace relay::pipeline {
namespace {

using SteadyClock = std::chrono::steady_clock;
// How often due probes are looked for: the shortest configured interval,
// within these bounds.
constexpr std::chrono::milliseconds kMaxTick{250};
constexpr std::chrono::milliseconds kMinTick{20};

std::chrono::milliseconds tickFor(const Snapshot& snap) {
  std::chrono::milliseconds tick = kMaxTick;
  for (const auto& u : snap.catalog.upstreams()) {
    auto interval = std::chrono::milliseconds(u.config->health.activeIntervalMs);
    if (interval.count() > 0) tick = std::min(tick, interval);
  }
  return std::max(tick, kMinTick);
}
constexpr std::chrono::milliseconds kProbeTimeout{5'000};

telemetry::HealthState gaugeOf(upstream::HealthStatus s) {
  switch (s) {
    case upstream::HealthStatus::kEjected:
      return telemetry::HealthState::kEjected;
    case upstream::HealthStatus::kHalfOpen:
      return telemetry::HealthState::kHalfOpen;
    case upstream::HealthStatus::kHealthy:
      break;
  }
  return telemetry::HealthState::kHealthy;
}

// One probe; true when the upstream answered 2xx.
net::Task<bool> probe(upstream::ClientPool& clients, const Snapshot& snap, std::size_t u) {
  const upstream::UpstreamInfo& info = snap.catalog.upstreams()[u];
  upstream::OutgoingRequest req;
  req.method = "GET";
  const std::string path = info.target.path("/models");  // outlives the send
  req.path = path;
  req.headers.add("authorization", info.authorization);
  req.headers.add("user-agent", "kimi-relay-health");
  upstream::Deadlines d;
  d.connect = std::min(kProbeTimeout, std::chrono::milliseconds(snap.config.timeouts.connectMs));
  d.firstByte = kProbeTimeout;
  d.idle = kProbeTimeout;
  d.total = SteadyClock::now() + kProbeTimeout;
  upstream::Failure failure;
  auto resp = co_await clients.send(u, req, d, failure);
  if (!resp) co_return false;
  std::string body;
  // Read to the end (the connection is reused), within the upstream's cap.
  bool complete = co_await resp->readAll(body, info.config->maxResponseBytes);
  co_return complete && resp->status() >= 200 && resp->status() < 300;
}

}  // namespace

net::Task<void> runActiveHealthChecks(Worker& worker,
                                      std::function<std::shared_ptr<const Snapshot>()> current) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  std::map<std::string, SteadyClock::time_point> due;  // by upstream name: survives reloads
  for (;;) {
    timer.expires_after(tickFor(worker.snapshot()));
    co_await timer.async_wait(boost::asio::use_awaitable);
    // This worker's snapshot and pool, taken together and kept for the tick:
    // a reload during a probe must not pair one upstream list with another's pool.
    std::shared_ptr<const Snapshot> snap = worker.snapshotPtr();
    std::shared_ptr<upstream::ClientPool> clients = worker.clientsPtr();
    if (snap != current()) continue;  // a reload is on its way to this worker
    const auto& ups = snap->catalog.upstreams();
    for (std::size_t u = 0; u < ups.size(); ++u) {
      const auto interval = std::chrono::milliseconds(ups[u].config->health.activeIntervalMs);
      if (interval.count() == 0) continue;
      auto now = SteadyClock::now();
      auto [it, fresh] = due.try_emplace(ups[u].name, now + interval);
      if (fresh || now < it->second) continue;
      it->second = now + interval;

      upstream::HealthTracker& health = (*snap->upstreamStates)[u].health();
      std::uint64_t ejections = health.ejectionsTotal();
      bool ok = co_await probe(*clients, *snap, u);
      now = SteadyClock::now();
      upstream::HealthTicket ticket = health.admit(now);
      if (!ticket) ticket = health.admitForced(now);  // ejected: only a success matters
      if (ok) {
        health.onSuccess(ticket, now);
      } else {
        health.onFailure(ticket, now);
        spdlog::debug("active health check of upstream '{}' failed", ups[u].name);
      }
      if (health.ejectionsTotal() > ejections) {
        snap->telemetry->ejection(static_cast<std::uint32_t>(u),
                                  telemetry::EjectionReason::kActiveCheck);
      }
      snap->telemetry->upstreamHealth(static_cast<std::uint32_t>(u), gaugeOf(health.status(now)));
    }
  }
}

}  // namespace relay::pipeline
