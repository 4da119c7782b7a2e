// Pieces shared by the HTTP/1.1 and HTTP/2 sessions (private to net/).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>

#include "relay/common/json_write.hpp"
#include "relay/config/config.hpp"
#include "relay/net/exchange.hpp"
#include "relay/net/server.hpp"

namespace relay::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using TlsStream = asio::ssl::stream<tcp::socket>;
using SteadyClock = std::chrono::steady_clock;

// What a session needs from its listener; shared by every connection on it.
struct SessionConfig {
  std::uint64_t maxRequestBytes = 4u << 20;
  std::uint32_t maxHeaderBytes = 64u << 10;
  std::uint64_t maxConnectionBodyBytes = 8u << 20;
  std::chrono::milliseconds headerTimeout{10'000};
  std::chrono::milliseconds bodyTimeout{30'000};
  std::chrono::milliseconds idleTimeout{75'000};
  config::Http2Settings http2;
  bool tls = false;
};

inline tcp::socket& lowestLayer(tcp::socket& s) {
  return s;
}
inline tcp::socket& lowestLayer(TlsStream& s) {
  return s.next_layer();
}

// Closes with a TCP RST (SO_LINGER 0): the peer sees a reset, not a clean end.
void resetConnection(tcp::socket& socket);

// "ip:port" of the peer, or "" when unknown.
std::string peerAddress(tcp::socket& socket);

// True for header fields that describe one hop only (RFC 9110 §7.6.1, RFC 9113
// §8.2.2): they never cross from one connection to another.
bool isHopByHopHeader(std::string_view lowerName);

// Canonical reason phrase for a status line ("OK", "Not Found", ...).
std::string_view reasonPhrase(int status);

// A live session that can be asked to wind down (graceful shutdown).
class Drainable {
 public:
  virtual ~Drainable() = default;
  // Stop taking new requests: HTTP/2 sends GOAWAY, HTTP/1.1 answers the
  // request in progress with `connection: close` or closes an idle connection.
  // Open exchanges finish. Called on the session's own worker thread.
  virtual void drain() = 0;
};

// The live sessions of one worker; touched only from that worker's thread.
struct SessionRegistry {
  std::unordered_set<Drainable*> live;
  bool draining = false;
  // Written by this worker only (no contention); read by the drain from
  // another thread, hence atomic.
  std::atomic<std::int64_t> activeExchanges{0};
};

// Adds a session to its worker's registry for as long as it lives.
class Registration {
 public:
  Registration(SessionRegistry* registry, Drainable* session)
      : registry_(registry), session_(session) {
    if (registry_) registry_->live.insert(session_);
  }
  ~Registration() {
    if (registry_) registry_->live.erase(session_);
  }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  bool draining() const { return registry_ && registry_->draining; }
  SessionRegistry* registry() const { return registry_; }

 private:
  SessionRegistry* registry_;
  Drainable* session_;
};

// One exchange counted as open, which is what a drain waits for, for as long
// as this lives. HTTP/1.1 holds it until the response's last byte was
// written; HTTP/2 until the stream is gone, i.e. its last frame has left the
// session (or the connection closed) — not merely when the handler returned
// and its bytes were queued.
class OpenExchange {
 public:
  explicit OpenExchange(SessionRegistry* registry) : registry_(registry) {
    if (registry_) registry_->activeExchanges.fetch_add(1, std::memory_order_relaxed);
  }
  ~OpenExchange() {
    if (registry_) registry_->activeExchanges.fetch_sub(1, std::memory_order_relaxed);
  }
  OpenExchange(const OpenExchange&) = delete;
  OpenExchange& operator=(const OpenExchange&) = delete;

 private:
  SessionRegistry* registry_;
};

// Per connection: the listener's settings and the worker's registry.
struct SessionContext {
  std::shared_ptr<const SessionConfig> config;
  SessionRegistry* registry = nullptr;
  // Held for the connection's life: its place under server.max_connections
  // and max_connections_per_ip (released when the session is destroyed).
  std::shared_ptr<void> slot;
  SteadyClock::time_point acceptedAt = SteadyClock::now();
};

// An OpenAI-shaped error the session gives itself (400, 408, 413, 431):
// status, JSON body and request id; `close` adds "connection: close".
ResponseHead sessionErrorHead(int status, std::string_view requestId);
std::string sessionErrorBody(std::string_view message, std::string_view code);

// Call these from a handler running on the socket's executor, as the listener
// does: the session's coroutines start inline there and take their own
// reference to it; started from outside, they would run after the caller's
// reference is gone. (tests/fuzz/session_harness.hpp starts them so too.)
//
// Starts HTTP/1.1 on an accepted connection; `initial` holds bytes already read
// (the h2c preface check). Defined in h1_session.cpp.
void startHttp1(tcp::socket socket, std::string initial, SessionContext context, Handler handler);
void startHttp1(TlsStream stream, SessionContext context, Handler handler);

// Starts HTTP/2 (h2c after the preface, or h2 after ALPN). Defined in h2_session.cpp.
void startHttp2(tcp::socket socket, std::string initial, SessionContext context, Handler handler);
void startHttp2(TlsStream stream, SessionContext context, Handler handler);

}  // namespace relay::net
