// One upstream connection and its deadline watchdog (private to upstream/).
#pragma once

#include <array>
#include <memory>
#include <optional>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "relay/upstream/client.hpp"

namespace relay::upstream {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using TlsStream = asio::ssl::stream<tcp::socket>;

struct Connection {
  static constexpr std::size_t kReadBytes = 16 * 1024;
  std::size_t upstream = 0;
  std::optional<tcp::socket> plain;
  std::optional<TlsStream> tls;
  // What the socket gave and the parser has not taken yet (the head, a
  // partial chunk). A body read asks the socket for up to kReadBytes at once,
  // so that a stream an upstream writes at once arrives in one read.
  boost::beast::flat_buffer buffer;
  Clock::time_point idleSince{};

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
// The deadline is "lazy": moving it later is a store; the timer callback
// re-arms itself until the stored deadline has really passed. Moving it
// earlier re-arms the timer at once.
class Watchdog {
 public:
  explicit Watchdog(const asio::any_io_executor& executor);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void watch(tcp::socket* socket) { state_->socket = socket; }
  void set(Clock::time_point deadline, FailureKind kind);
  void disarm();
  // Which deadline closed the socket, or kNone.
  FailureKind fired() const { return state_->fired; }

 private:
  struct State {
    asio::steady_timer timer;
    tcp::socket* socket = nullptr;
    Clock::time_point deadline = Clock::time_point::max();
    FailureKind kind = FailureKind::kNone;
    FailureKind fired = FailureKind::kNone;
    bool waiting = false;
    explicit State(const asio::any_io_executor& ex) : timer(ex) {}
  };
  static void arm(const std::shared_ptr<State>& state);
  std::shared_ptr<State> state_;
};

}  // namespace relay::upstream
