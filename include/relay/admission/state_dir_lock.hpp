// One gateway process per state_dir. Two processes writing budgets.json (or
// keys.json) in one directory would each overwrite the other's spend with its
// own: the second is refused at start-up instead. Replicas that must share
// limits and budgets share them through Redis (cluster.redis_url), each with
// a state_dir of its own (or none).
#pragma once

#include <string>

namespace relay::admission {

class StateDirLock {
 public:
  // Takes an exclusive advisory lock (flock) on `<dir>/.kimi-relay.lock`,
  // creating the directory's lock file if needed, and writes our pid into it.
  // "" locks nothing. Throws std::runtime_error naming the directory (and the
  // pid holding it, when known) if another process holds it.
  explicit StateDirLock(const std::string& dir);
  ~StateDirLock();
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace relay::admission
