#include "relay/admission/state_dir_lock.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <string>
#include <sys/file.h>
#include <unistd.h>

namespace relay::admission {

StateDirLock::StateDirLock(const std::string& dir) {
  if (dir.empty()) return;
  const std::string path = dir + "/.kimi-relay.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    throw std::runtime_error("state_dir " + dir + ": cannot open " + path + ": " +
                             std::strerror(errno));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    std::string holder = n > 0 ? std::string(pid, static_cast<std::size_t>(n)) : std::string();
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error(
        "state_dir " + dir + " is in use by another kimi-relay process" +
        (holder.empty() ? std::string() : " (pid " + holder + ")") +
        ": two gateways in one state_dir would overwrite each other's budgets; give each "
        "replica its own state_dir, and share limits through cluster.redis_url");
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] ssize_t w = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
}

StateDirLock::~StateDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace relay::admission
