// One upstream connection and its deadline watchdog (private to upstream/).
#pragma once

#include <array>
#include <memory>
#include <optional>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>

#include "relay/net/read_buffer.hpp"
#include "relay/upstream/client.hpp"

namespace relay::upstream {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using TlsStream = asio::ssl::stream<tcp::socket>;

class WatchdogList;

struct Connection {
  static constexpr std::size_t kReadBytes = net::kReadBlockBytes;
  std::size_t upstream = 0;
  std::optional<tcp::socket> plain;
  std::optional<TlsStream> tls;
  // What the socket gave and the parser has not taken yet (the head, a
  // partial chunk). A body read asks the socket for up to kReadBytes at once,
  // so that a stream an upstream writes at once arrives in one read.
  net::ReadBuffer buffer;
  Clock::time_point idleSince{};
  // The watchdogs of the context this connection lives on: every exchange
  // on it takes its watchdog from here, without a service lookup (a mutex)
  // per request.
  WatchdogList* watchdogs = nullptr;

  tcp::socket& socket() { return tls ? tls->next_layer() : *plain; }

  // Runs `f(stream)` on whichever stream this is (both are Asio streams).
  template <class F>
  decltype(auto) visit(F&& f) {
    return tls ? f(*tls) : f(*plain);
  }

  // True when an idle pooled connection was closed by the peer (or has
  // unexpected bytes pending): one non-blocking peek, no read consumed.
  bool looksDead();
};

// Closes a connection's socket when a deadline passes, recording which one.
//
// A watchdog holds no timer of its own: every armed watchdog of an
// io_context is on one list (WatchdogList, a service of the context) with
// one timer, set at the earliest deadline the list had when it last looked.
// Moving a deadline later (what an exchange does with every read) is a
// store; moving it before the timer's expiry moves the timer. When the timer
// fires, every watchdog whose deadline passed closes its socket, and the
// timer is set at the earliest deadline left. Not thread-safe: a watchdog is
// used on its executor's thread only, as the sockets are.
class Watchdog {
 public:
  explicit Watchdog(const asio::any_io_executor& executor);
  // On a list already made for the context (Connection::watchdogs).
  explicit Watchdog(WatchdogList& list) : list_(list) {}
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The socket to close; a watchdog with none is not armed.
  void watch(tcp::socket* socket) { socket_ = socket; }
  void set(Clock::time_point deadline, FailureKind kind);
  void disarm();
  // Which deadline closed the socket, or kNone.
  FailureKind fired() const { return fired_; }
  WatchdogList& list() const { return list_; }

 private:
  friend class WatchdogList;
  WatchdogList& list_;
  Watchdog* prev_ = nullptr;  // on the list while linked_
  Watchdog* next_ = nullptr;
  bool linked_ = false;
  tcp::socket* socket_ = nullptr;
  Clock::time_point deadline_ = Clock::time_point::max();
  FailureKind kind_ = FailureKind::kNone;
  FailureKind fired_ = FailureKind::kNone;
};

// The armed watchdogs of one io_context and their timer.
class WatchdogList final : public asio::execution_context::service {
 public:
  using key_type = WatchdogList;
  static inline asio::execution_context::id id;

  explicit WatchdogList(asio::execution_context& context) : service(context) {}
  ~WatchdogList() override = default;

  // Armed watchdogs (for tests).
  std::size_t armed() const { return armed_; }

 private:
  friend class Watchdog;
  void shutdown() override {
    shutDown_ = true;
    timer_.reset();
  }
  // The timer is made with the first watchdog's executor (an io_context's).
  void attach(const asio::any_io_executor& executor) {
    if (!timer_ && !shutDown_) timer_.emplace(executor);
  }
  void link(Watchdog& w);
  void unlink(Watchdog& w);
  // Sets the timer at `deadline` unless it is set that early already.
  void wakeBy(Clock::time_point deadline);
  // The timer fired: closes what is due, and sets the timer for what is not.
  void expire();

  Watchdog* head_ = nullptr;
  std::size_t armed_ = 0;
  std::optional<asio::steady_timer> timer_;
  bool shutDown_ = false;
  Clock::time_point timerAt_ = Clock::time_point::max();  // max: no wait that counts pending
};

}  // namespace relay::upstream
