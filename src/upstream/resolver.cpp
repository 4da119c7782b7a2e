#include "resolver.hpp"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <netdb.h>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace relay::upstream::detail {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

constexpr unsigned kThreads = 2;

struct Lookup {
  std::vector<tcp::endpoint> endpoints;
  std::string error;  // "" on success
};

Lookup lookUp(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  addrinfo* list = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  Lookup out;
  if (rc != 0) {
    out.error = ::gai_strerror(rc);
    return out;
  }
  for (addrinfo* a = list; a; a = a->ai_next) {
    tcp::endpoint ep;
    if (a->ai_addrlen <= ep.capacity()) {
      std::memcpy(ep.data(), a->ai_addr, a->ai_addrlen);
      ep.resize(a->ai_addrlen);
      out.endpoints.push_back(ep);
    }
  }
  ::freeaddrinfo(list);
  if (out.endpoints.empty()) out.error = "no address";
  return out;
}

// The lookup threads, their queue and the cache. Process-wide: names are
// shared by every worker.
class Pool {
 public:
  static Pool& instance() {
    static Pool* pool = new Pool();  // never destroyed: threads may outlive main's objects
    return *pool;
  }

  std::optional<Lookup> cached(const std::string& key) {
    std::lock_guard lock(mutex_);
    auto it = cache_.find(key);
    if (it == cache_.end() || Clock::now() >= it->second.expires) return std::nullopt;
    return it->second.lookup;
  }

  // False when kResolverMaxPending lookups are already waiting.
  bool submit(std::function<void()> job) {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= kResolverMaxPending) return false;
    queue_.push_back(std::move(job));
    wake_.notify_one();
    return true;
  }

  void store(const std::string& key, const Lookup& lookup) {
    if (!lookup.error.empty()) return;  // failures are not cached: the next connect asks again
    std::lock_guard lock(mutex_);
    cache_[key] = {lookup, Clock::now() + kResolverTtl};
    if (cache_.size() > 1024) cache_.erase(cache_.begin());
  }

 private:
  Pool() {
    for (unsigned i = 0; i < kThreads; ++i) std::thread([this] { run(); }).detach();
  }

  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return !queue_.empty(); });
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job();
    }
  }

  struct Entry {
    Lookup lookup;
    Clock::time_point expires;
  };
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  std::map<std::string, Entry> cache_;
};

// What the lookup thread and the waiting coroutine share. The thread never
// touches the waiter's executor (its io_context may be gone by the time a
// slow lookup returns): it fills the result and sets `done`, which the
// waiter polls.
struct Shared {
  std::mutex mutex;
  Lookup result;
  bool done = false;
};

}  // namespace

Task<Resolved> resolve(const std::string& host, std::uint16_t port, Clock::time_point deadline) {
  Pool& pool = Pool::instance();
  const std::string key = host + ":" + std::to_string(port);
  Resolved out;
  std::optional<Lookup> hit = pool.cached(key);
  if (!hit) {
    auto shared = std::make_shared<Shared>();
    bool queued = pool.submit([shared, host, port, key, &pool] {
      Lookup found = lookUp(host, port);
      pool.store(key, found);
      std::lock_guard lock(shared->mutex);
      shared->result = std::move(found);
      shared->done = true;
    });
    if (!queued) {
      out.failure = {FailureKind::kConnect, "too many name lookups in progress for " + host};
      co_return out;
    }
    asio::steady_timer timer(co_await asio::this_coro::executor);
    auto slice = std::chrono::milliseconds(1);
    for (;;) {
      {
        std::lock_guard lock(shared->mutex);
        if (shared->done) {
          hit = std::move(shared->result);
          break;
        }
      }
      auto now = Clock::now();
      if (now >= deadline) {
        out.failure = {FailureKind::kConnectTimeout, "resolving " + host + " did not finish in time"};
        co_return out;
      }
      timer.expires_at(std::min(deadline, now + slice));
      auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) {  // the caller left
        out.failure = {FailureKind::kCancelled, ""};
        co_return out;
      }
      slice = std::min(slice * 2, std::chrono::milliseconds(20));
    }
  }
  if (!hit->error.empty()) {
    out.failure = {FailureKind::kConnect, "cannot resolve " + host + ": " + hit->error};
    co_return out;
  }
  out.endpoints = std::move(hit->endpoints);
  co_return out;
}

}  // namespace relay::upstream::detail
