// Worker event loops and the listeners that feed them.
//
// Threading model (as nginx and Envoy): one `io_context` per worker thread, each
// with its own SO_REUSEPORT acceptor per listener, so a connection and every
// exchange on it live on one thread from accept to close. Shared state above this
// layer (buckets, circuit states, metrics) must be atomic or sharded.
//
// Only the app and the mock include this header; it keeps Asio to a forward
// declaration so that it stays cheap to include.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "relay/config/config.hpp"
#include "relay/net/exchange.hpp"

namespace boost::asio {
class io_context;
}

namespace relay::net {

struct TlsFiles {
  std::string certFile;  // PEM chain
  std::string keyFile;   // PEM private key
};

struct ListenerOptions {
  std::string name = "main";  // for logs: "main", "tls", "admin"
  config::Endpoint address;
  std::optional<TlsFiles> tls;  // ALPN h2, http/1.1; absent = plaintext HTTP/1.1 and h2c
  std::uint64_t maxRequestBytes = 4u << 20;
  std::uint32_t maxHeaderBytes = 64u << 10;
  std::uint64_t maxConnectionBodyBytes = 8u << 20;
  std::uint32_t headerTimeoutMs = 10'000;
  std::uint32_t bodyTimeoutMs = 30'000;
  std::uint32_t idleTimeoutMs = 75'000;
  // SO_SNDBUF of the accepted sockets (set on the listening socket, which
  // they inherit it from); 0 = the kernel's autotuning.
  std::uint32_t sendBufferBytes = 0;
  config::Http2Settings http2;
  // Connections beyond these are closed at accept (counted); listeners of
  // one `connectionGroup` share the counts. 0 = no cap.
  std::uint32_t maxConnections = 0;
  std::uint32_t maxConnectionsPerIp = 0;
  std::string connectionGroup = "client";
  // Closed by stopAccepting() (a drain). The admin listener stays open so that
  // /readyz can say 503 and /healthz 200 until the process exits.
  bool drains = true;
};

// Loads the chain and key as a TLS listener would, and checks they match.
// Throws std::runtime_error naming the file that fails (for --check-config).
void checkTlsFiles(const TlsFiles& files);

class Runtime {
 public:
  // `workers` event loops; 0 = one per core. Each polls for `busyPoll` after
  // its last work before it sleeps (server.busy_poll_us; 0 = sleeps at once).
  explicit Runtime(unsigned workers, std::chrono::microseconds busyPoll = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  unsigned workers() const;
  boost::asio::io_context& context(unsigned worker);

  // Binds `options.address` once per worker (SO_REUSEPORT); connections accepted
  // on worker i run `handlerFor(i)`. A port of 0 is resolved by the first bind and
  // reused by the others. Returns the bound address. Throws std::runtime_error
  // naming the address (or the certificate/key file) on failure.
  config::Endpoint listen(const ListenerOptions& options,
                          const std::function<Handler(unsigned worker)>& handlerFor);

  // Replaces the certificate and key of the TLS listener configured at
  // `address` for new connections (open ones keep theirs). False when no TLS
  // listener has that address; throws std::runtime_error naming a bad file.
  bool reloadTls(const config::Endpoint& address, const TlsFiles& files);

  // Runs every worker on its own thread and returns when all have stopped.
  void run();
  // Closes every acceptor (in-flight exchanges continue). Thread-safe.
  void stopAccepting();
  // Stops every event loop now. Thread-safe.
  void stop();
  // After run() returned: destroys what the loops still held (open sessions,
  // exchanges cut at the drain deadline) while everything they refer to is
  // still alive. Idempotent; the destructor calls it.
  void shutdown();

  // Exchanges in progress on the drainable listeners, across workers (drain).
  std::int64_t activeExchanges() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace relay::net
