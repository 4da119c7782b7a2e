// The running gateway: listeners, workers, the current config snapshot,
// signals (SIGTERM/SIGINT drain, SIGHUP reload) and the budget-state flusher
// (which also samples the console's history). Its key administration is in
// gateway_keys.cpp; each worker's tick in worker_tick.hpp; the settings a
// reload leaves for a restart in restart_only.hpp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "relay/admission/key_registry.hpp"
#include "relay/api/router.hpp"
#include "relay/cluster/redis_gate.hpp"
#include "relay/common/pending.hpp"
#include "relay/config/config.hpp"
#include "relay/net/server.hpp"
#include "relay/pipeline/worker.hpp"

namespace relay::app {

class Gateway {
 public:
  // Loads nothing itself: `snapshot` is the validated start-up state, built
  // from `fileConfig` (the file as read) with the runtime keys of `keys`.
  Gateway(std::string configPath, pipeline::Services services, config::Config fileConfig,
          std::shared_ptr<admission::KeyRegistry> keys,
          std::shared_ptr<const pipeline::Snapshot> snapshot);
  ~Gateway();

  // Binds every listener; throws std::runtime_error naming what failed.
  void listen();
  // Serves until a drain completes; returns the process exit code.
  int run();

  // Re-reads the config file and switches every worker to it. On any error the
  // old config keeps serving and the error is returned (and logged). Blocks:
  // never call it on an event loop (reloadInBackground does it for them).
  std::string reload();
  // Runs reload() on a thread of its own (joined before the loops go away).
  std::shared_ptr<PendingText> reloadInBackground();

  // Applies a runtime key change (admin API): the store is updated and
  // written, and every worker switches to a snapshot with the new keys.
  Reply changeKeys(const api::KeyOp& op);

 private:
  void installSignals();
  void runInBackground(std::function<void()> job);
  // Builds and switches to a snapshot of `fileConfig` with the runtime keys.
  // reloadMutex_ held. Throws what building throws.
  void applyConfig(config::Config fileConfig);
  void audit(std::string_view action, const std::string& keyName, std::string_view detail);
  // Runtime keys changed on other replicas (cluster): taken where newer,
  // applied; ours that Redis lacks are sent to it. Off the loops.
  void takeSharedKeys(const std::map<std::string, std::string>& shared);
  void armReload();
  void beginDrain(int signo);
  void pollDrain();
  // Saves spend every kFlushInterval; every `releaseRounds` of them, hands
  // free memory back (releaseProcessFreeMemory()).
  void flusherLoop(unsigned releaseRounds);
  void flushState();
  void sampleLiveStats();
  std::shared_ptr<const pipeline::Snapshot> current() const;

  std::string configPath_;
  pipeline::Services services_;
  config::Config fileConfig_;  // the file as last loaded (reloadMutex_)
  // The file as the process started: what the restart-only settings
  // (restart_only.hpp) still are, whatever reloads came since.
  const config::Config startConfig_;
  std::shared_ptr<admission::KeyRegistry> keys_;
  std::shared_ptr<cluster::KeyPublisher> keyPublisher_;  // cluster: runtime keys to every replica
  std::mutex reloadMutex_;                               // serialises reloads
  mutable std::mutex snapshotMutex_;  // guards snapshot_ between reload and readers off the loops
  std::shared_ptr<const pipeline::Snapshot> snapshot_;
  net::Runtime runtime_;
  std::vector<std::unique_ptr<pipeline::Worker>> workers_;
  api::AdminState admin_;
  struct Control;  // Asio objects on worker 0's loop
  std::unique_ptr<Control> control_;

  std::mutex backgroundMutex_;
  std::vector<std::thread> background_;  // reloads in progress or done, joined at exit
  std::set<std::thread::id> finished_;   // ids of background_ threads that returned
  void joinBackground();

  std::thread flusher_;
  std::mutex flusherMutex_;
  std::condition_variable flusherWake_;
  bool stopFlusher_ = false;
};

}  // namespace relay::app
