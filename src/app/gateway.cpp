#include "gateway.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

#include "memory_release.hpp"
#include "relay/cluster/redis_gate.hpp"
#include "relay/config/parse.hpp"
#include "relay/pipeline/active_health.hpp"
#include "relay/pipeline/mcp.hpp"
#include "restart_only.hpp"
#include "worker_tick.hpp"

namespace relay::app {

namespace asio = boost::asio;
using SteadyClock = std::chrono::steady_clock;

// How often budget spend is written to state_dir: a crash loses at most this.
constexpr std::chrono::seconds kFlushInterval{2};
// After the drain deadline, how long aborted streams get to write their error event.
constexpr std::chrono::milliseconds kAbortGrace{500};
// At most this long after the last exchange, for settlements to reach Redis.
constexpr std::chrono::milliseconds kSettleGrace{1000};
// How long a config change waits for every worker to switch to it (they do
// within a loop turn; the bound only matters while loops are stopping).
constexpr std::chrono::seconds kSwitchWait{2};
// Open connections the admin listener accepts (probes, scrapes, the console).
constexpr std::uint32_t kAdminMaxConnections = 256;

struct Gateway::Control {
  explicit Control(asio::io_context& ctx)
      : stopSignals(ctx, SIGTERM, SIGINT), reloadSignal(ctx, SIGHUP), drainTimer(ctx) {}
  asio::signal_set stopSignals;
  asio::signal_set reloadSignal;
  asio::steady_timer drainTimer;
  SteadyClock::time_point drainDeadline{};
  std::optional<SteadyClock::time_point> settleDeadline;
  bool streamsAborted = false;
};

Gateway::Gateway(std::string configPath, pipeline::Services services, config::Config fileConfig,
                 std::shared_ptr<admission::KeyRegistry> keys,
                 std::shared_ptr<const pipeline::Snapshot> snapshot)
    : configPath_(std::move(configPath)),
      services_(services),
      fileConfig_(std::move(fileConfig)),
      startConfig_(fileConfig_),
      keys_(std::move(keys)),
      snapshot_(std::move(snapshot)),
      runtime_(snapshot_->config.server.workers,
               std::chrono::microseconds(snapshot_->config.server.busyPollUs)) {
  for (unsigned i = 0; i < runtime_.workers(); ++i) {
    workers_.push_back(std::make_unique<pipeline::Worker>(snapshot_));
    // Shared limits and budgets: one Redis connection per worker loop.
    // Worker 0 also does the process-wide part: budgets in step with the
    // shared spend, runtime keys shared with every replica.
    if (snapshot_->config.cluster.redis) {
      cluster::ClusterHooks hooks;
      if (i == 0) {
        hooks.current = [this] { return this->current(); };
        hooks.keysChanged = [this](std::map<std::string, std::string> shared) {
          runInBackground([this, shared = std::move(shared)] { takeSharedKeys(shared); });
        };
      }
      cluster::RedisGateParts parts =
          cluster::makeRedisGate(runtime_.context(i), snapshot_->config.cluster, std::move(hooks));
      workers_.back()->setGate(std::move(parts.gate));
      if (parts.publisher) keyPublisher_ = std::move(parts.publisher);
    }
  }
  control_ = std::make_unique<Control>(runtime_.context(0));
  admin_.metrics = services_.metrics;
  admin_.snapshot = [this] { return current(); };
  admin_.reload = [this] { return reloadInBackground(); };
  admin_.registry = keys_.get();
  admin_.live = services_.live;
  admin_.version = RELAY_VERSION;
  admin_.keyChange = [this](api::KeyOp op) {
    auto pending = std::make_shared<PendingReply>();
    runInBackground([this, pending, op = std::move(op)] { pending->set(changeKeys(op)); });
    return pending;
  };
}

Gateway::~Gateway() {
  joinBackground();
  {
    std::lock_guard lock(flusherMutex_);
    stopFlusher_ = true;
  }
  flusherWake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

std::shared_ptr<const pipeline::Snapshot> Gateway::current() const {
  std::lock_guard lock(snapshotMutex_);
  return snapshot_;
}

namespace {

// The kernel caps SO_SNDBUF at net.core.wmem_max without a word: say so when
// server.send_buffer_bytes is over it.
void warnIfSendBufferCapped(std::uint32_t bytes) {
  if (bytes == 0) return;
  std::ifstream file("/proc/sys/net/core/wmem_max");
  std::uint64_t max = 0;
  if (!(file >> max) || bytes <= max) return;
  spdlog::warn(
      "server.send_buffer_bytes {} is over net.core.wmem_max ({}): the kernel gives each "
      "caller's socket {} bytes (twice the cap) instead; raise net.core.wmem_max or lower the "
      "setting",
      bytes, max, 2 * max);
}

}  // namespace

void Gateway::listen() {
  const config::Config& cfg = snapshot_->config;
  warnIfSendBufferCapped(cfg.server.sendBufferBytes);
  auto mainFor = [this](unsigned w) { return api::mainHandler(*workers_[w]); };
  auto options = [&](std::string name, const config::Endpoint& address) {
    net::ListenerOptions o;
    o.name = std::move(name);
    o.address = address;
    o.maxRequestBytes = cfg.server.maxRequestBytes;
    o.maxHeaderBytes = cfg.server.maxHeaderBytes;
    o.maxConnectionBodyBytes = cfg.server.maxConnectionBodyBytes;
    o.headerTimeoutMs = cfg.server.headerTimeoutMs;
    o.bodyTimeoutMs = cfg.server.bodyTimeoutMs;
    o.idleTimeoutMs = cfg.server.idleTimeoutMs;
    o.sendBufferBytes = cfg.server.sendBufferBytes;
    o.http2 = cfg.server.http2;
    o.maxConnections = cfg.server.maxConnections;
    o.maxConnectionsPerIp = cfg.server.maxConnectionsPerIp;
    o.connectionGroup = "client";
    return o;
  };
  for (const auto& ep : cfg.server.listen) {
    auto bound = runtime_.listen(options("main", ep), mainFor);
    spdlog::info("listening on http://{} (main)", bound.text());
  }
  for (const auto& tl : cfg.server.tlsListen) {
    net::ListenerOptions o = options("tls", tl.address);
    o.tls = net::TlsFiles{tl.certFile, tl.keyFile};
    auto bound = runtime_.listen(o, mainFor);
    spdlog::info("listening on https://{} (tls)", bound.text());
  }
  if (cfg.admin.listen) {
    net::ListenerOptions o = options("admin", *cfg.admin.listen);
    o.maxRequestBytes = 64 * 1024;
    o.maxConnectionBodyBytes = 128 * 1024;
    o.drains = false;       // probes must keep getting answers while the rest drains
    o.sendBufferBytes = 0;  // a large scrape is not held to the callers' buffer
    // Probes and scrapes must get through when callers fill the main
    // listeners: the admin listener counts apart, with a cap of its own.
    o.connectionGroup = "admin";
    o.maxConnections = kAdminMaxConnections;
    o.maxConnectionsPerIp = 0;
    auto bound = runtime_.listen(o, [this](unsigned) { return api::adminHandler(admin_); });
    spdlog::info("listening on http://{} (admin)", bound.text());
  }
}

int Gateway::run() {
  installSignals();
  // The flusher releases on the workers' tick (server.memory_release_ms), at
  // its own grain; the setting changes only on restart.
  const std::chrono::milliseconds releaseEvery(snapshot_->config.server.memoryReleaseMs);
  const auto releaseRounds =
      static_cast<unsigned>(std::max<std::int64_t>(1, releaseEvery / kFlushInterval));
  flusher_ = std::thread([this, releaseRounds] { flusherLoop(releaseRounds); });
  // Active health checks run on worker 0's loop, through its connection pool.
  asio::co_spawn(runtime_.context(0),
                 pipeline::runActiveHealthChecks(*workers_[0], [this] { return current(); }),
                 asio::detached);
  // Idle MCP sessions end at their servers (a reload may add servers later).
  asio::co_spawn(runtime_.context(0), pipeline::runMcpSessionSweeper(*workers_[0]), asio::detached);
  for (unsigned i = 0; i < runtime_.workers(); ++i)
    asio::co_spawn(runtime_.context(i),
                   runWorkerTick(*workers_[i], i, runtime_.workers(), releaseEvery),
                   asio::detached);
  admin_.ready = true;
  const auto& snap = *snapshot_;
  spdlog::info("kimi-relay {} ready: {} workers, {} upstreams, {} models, {} keys", RELAY_VERSION,
               runtime_.workers(), snap.catalog.upstreams().size(), snap.catalog.routes().size(),
               snap.keys.tenants().size());
  runtime_.run();
  // Exchanges cut at the drain deadline settle as their frames are destroyed:
  // destroy them while the workers they refer to are alive, then save spend.
  // Everything bound to a loop goes before the loop does.
  control_.reset();
  joinBackground();  // a reload in progress posts to the loops: let it finish first
  for (auto& w : workers_)
    w->releaseConnections();
  keyPublisher_.reset();  // shares worker 0's Redis link and timers
  runtime_.shutdown();
  {
    std::lock_guard lock(flusherMutex_);
    stopFlusher_ = true;
  }
  flusherWake_.notify_all();
  flusher_.join();
  flushState();  // a clean shutdown loses no spend
  return 0;
}

void Gateway::installSignals() {
  control_->stopSignals.async_wait([this](boost::system::error_code ec, int signo) {
    if (!ec) beginDrain(signo);
  });
  armReload();
}

void Gateway::armReload() {
  control_->reloadSignal.async_wait([this](boost::system::error_code ec, int) {
    if (ec) return;
    reloadInBackground();  // worker 0 keeps serving while the new config is built
    armReload();
  });
}

void Gateway::beginDrain(int signo) {
  auto timeout = std::chrono::milliseconds(current()->config.server.drainTimeoutMs);
  admin_.draining = true;  // before the log line: tests take the line as "/readyz says 503"
  spdlog::info("received {}; draining for up to {} ms", strsignal(signo), timeout.count());
  if (services_.events) services_.events->close();  // event streams end, not hold the drain
  runtime_.stopAccepting();
  control_->drainDeadline = SteadyClock::now() + timeout;
  pollDrain();
}

void Gateway::pollDrain() {
  auto open = runtime_.activeExchanges();
  auto now = SteadyClock::now();
  if (open == 0) {
    // Settlements on their way to the shared state store land first (at
    // most kSettleGrace): a budget must not lose the last requests' spend.
    std::size_t unsettled = 0;
    for (auto& w : workers_)
      unsettled += w->gate().unsettled();
    if (unsettled > 0) {
      if (!control_->settleDeadline) control_->settleDeadline = now + kSettleGrace;
      if (now < *control_->settleDeadline) {
        control_->drainTimer.expires_after(std::chrono::milliseconds(10));
        control_->drainTimer.async_wait([this](boost::system::error_code ec) {
          if (!ec) pollDrain();
        });
        return;
      }
      spdlog::warn("drained: {} settlements to Redis not confirmed; stopping anyway", unsettled);
    }
    spdlog::info("drained: no exchange left open");
    runtime_.stop();
    return;
  }
  if (now >= control_->drainDeadline && !control_->streamsAborted) {
    // Streams still open end with an SSE error event, not a cut: abort their
    // upstream reads and give them a moment to say so.
    spdlog::warn("drain timeout: ending {} exchanges still open", open);
    control_->streamsAborted = true;
    for (unsigned i = 0; i < runtime_.workers(); ++i)
      asio::post(runtime_.context(i), [w = workers_[i].get()] { w->abortStreams(); });
    control_->drainDeadline = now + kAbortGrace;
  } else if (now >= control_->drainDeadline) {
    spdlog::warn("{} exchanges did not end in time and are cut", open);
    runtime_.stop();
    return;
  }
  control_->drainTimer.expires_after(std::chrono::milliseconds(20));
  control_->drainTimer.async_wait([this](boost::system::error_code ec) {
    if (!ec) pollDrain();
  });
}

std::shared_ptr<PendingText> Gateway::reloadInBackground() {
  auto pending = std::make_shared<PendingText>();
  runInBackground([this, pending] { pending->set(reload()); });
  return pending;
}

void Gateway::runInBackground(std::function<void()> job) {
  std::lock_guard lock(backgroundMutex_);
  // Threads of jobs that ended are joined here, so the list stays short.
  for (auto it = background_.begin(); it != background_.end();) {
    if (it->joinable() && finished_.count(it->get_id())) {
      finished_.erase(it->get_id());
      it->join();
      it = background_.erase(it);
    } else {
      ++it;
    }
  }
  background_.emplace_back([this, job = std::move(job)] {
    job();
    std::lock_guard done(backgroundMutex_);
    finished_.insert(std::this_thread::get_id());
  });
}

void Gateway::joinBackground() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(backgroundMutex_);
    threads.swap(background_);
  }
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
}

std::string Gateway::reload() {
  // One change at a time (SIGHUP on worker 0, POST /admin/reload and key
  // changes from any worker could overlap): each builds on the one before.
  std::lock_guard serial(reloadMutex_);
  try {
    config::Config cfg = config::loadConfigFile(configPath_);
    for (const auto& tl : cfg.server.tlsListen)
      net::checkTlsFiles({tl.certFile, tl.keyFile});
    applyConfig(std::move(cfg));
  } catch (const std::exception& e) {
    services_.metrics->configReload(telemetry::ReloadOutcome::kFailure);
    spdlog::error("reload refused, the running config stays: {}", e.what());
    return e.what();
  }
  services_.metrics->configReload(telemetry::ReloadOutcome::kSuccess);
  std::shared_ptr<const pipeline::Snapshot> next = current();
  // Certificates change for new handshakes; listener addresses, workers and
  // size limits are fixed at start (restart_only.hpp).
  for (const auto& tl : next->config.server.tlsListen) {
    try {
      if (!runtime_.reloadTls(tl.address, {tl.certFile, tl.keyFile}))
        spdlog::warn("reload: TLS listener {} is new; it needs a restart", tl.address.text());
    } catch (const std::exception& e) {
      spdlog::error("reload: {}", e.what());  // checked above; a file changed in between
    }
  }
  spdlog::set_level(spdlog::level::from_str(next->config.log.level));
  // Against what runs, not the last reload: a second reload with the same
  // change warns again, and one back to the running value does not.
  if (std::string left = restartOnlyWarning(restartOnlyChanges(startConfig_, fileConfig_));
      !left.empty())
    spdlog::warn("{}", left);
  spdlog::info("reloaded {}: {} upstreams, {} models, {} keys", configPath_,
               next->catalog.upstreams().size(), next->catalog.routes().size(),
               next->keys.tenants().size());
  return {};
}

void Gateway::applyConfig(config::Config fileConfig) {
  config::Config effective = fileConfig;
  effective.keys = keys_->effectiveKeys(fileConfig);  // the runtime keys on top of the file's
  // The directory this process locked and keeps its runtime keys in: budgets
  // are written beside them until a restart (restart_only.hpp).
  effective.stateDir = startConfig_.stateDir;
  auto next =
      std::make_shared<const pipeline::Snapshot>(std::move(effective), services_, current().get());
  {
    std::lock_guard lock(snapshotMutex_);
    snapshot_ = next;
  }
  fileConfig_ = std::move(fileConfig);
  // Every worker switches; wait (boundedly) until they all have, so that a
  // change answered as done is in force for the very next request anywhere.
  struct Latch {
    std::mutex mutex;
    std::condition_variable done;
    unsigned left;
  };
  auto latch = std::make_shared<Latch>();
  latch->left = runtime_.workers();
  for (unsigned i = 0; i < runtime_.workers(); ++i) {
    asio::post(runtime_.context(i), [w = workers_[i].get(), next, latch] {
      w->setSnapshot(next);
      std::lock_guard lock(latch->mutex);
      if (--latch->left == 0) latch->done.notify_all();
    });
  }
  std::unique_lock lock(latch->mutex);
  latch->done.wait_for(lock, kSwitchWait, [&] { return latch->left == 0; });
}

void Gateway::flusherLoop(unsigned releaseRounds) {
  std::unique_lock lock(flusherMutex_);
  sampleLiveStats();
  unsigned rounds = 0;
  while (!stopFlusher_) {
    flusherWake_.wait_for(lock, kFlushInterval, [this] { return stopFlusher_; });
    lock.unlock();
    flushState();  // fsync may take milliseconds: never on an event loop
    sampleLiveStats();
    // Free memory the allocator keeps for reuse goes back to the system:
    // with tcmalloc the whole process's free pages, with mimalloc this
    // thread's own heap (each worker's goes back on its own tick,
    // runWorkerTick()).
    if (++rounds % releaseRounds == 0) releaseProcessFreeMemory();
    lock.lock();
  }
}

// The console's history takes a sample every 10 s (LiveStats::kSampleMs);
// called every kFlushInterval, it adds one when one is due.
void Gateway::sampleLiveStats() {
  if (!services_.live) return;
  auto unixMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  services_.live->sampleIfDue(unixMs, telemetry::LiveStats::steadyNowMs());
}

void Gateway::flushState() {
  auto snap = current();
  if (auto error = snap->budgets->flush()) spdlog::error("budget state not saved: {}", *error);
}

}  // namespace relay::app
