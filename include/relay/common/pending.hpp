// A result computed on a thread of its own and collected by an event loop:
// work that may block (a config reload reads files, parses YAML and builds
// every table; a key change writes its store) never runs on a worker. The
// loop polls `ready()`: the thread that fills the result never touches the
// loop, whose io_context may be gone by the time a slow job ends.
#pragma once

#include <mutex>
#include <optional>
#include <string>

namespace relay {

template <class T>
class Pending {
 public:
  void set(T value) {
    std::lock_guard lock(mutex_);
    value_ = std::move(value);
  }
  // The value once set.
  std::optional<T> ready() const {
    std::lock_guard lock(mutex_);
    return value_;
  }

 private:
  mutable std::mutex mutex_;
  std::optional<T> value_;
};

using PendingText = Pending<std::string>;

// An HTTP answer made off the loop (status and JSON body).
struct Reply {
  int status = 200;
  std::string body;
};
using PendingReply = Pending<Reply>;

}  // namespace relay
