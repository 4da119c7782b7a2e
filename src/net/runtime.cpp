// Worker event loops, SO_REUSEPORT listeners, and the first bytes of a
// connection: TLS handshake + ALPN, or the h2c preface check on plaintext.
#include <map>
#include <mutex>
#include <stdexcept>
#include <sys/socket.h>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "connection_limits.hpp"
#include "event_loop.hpp"
#include "relay/common/cpu.hpp"
#include "relay/common/limits.hpp"
#include "relay/net/server.hpp"
#include "session_common.hpp"
#include "tls_context.hpp"

namespace relay::net {
namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::string_view kH2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

using WorkGuard = asio::executor_work_guard<asio::io_context::executor_type>;

tcp::endpoint resolveEndpoint(const config::Endpoint& e) {
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(e.host == "localhost" ? "127.0.0.1" : e.host, ec);
  if (ec) throw std::runtime_error("listen address '" + e.text() + "': not an IP address");
  return {addr, e.port};
}

// Closes `socket` if `timer` expires first. The returned flag must be set
// before the socket moves on (or the frame that owns it ends): a timer whose
// expiry was already queued when cancel() ran would otherwise touch it.
std::shared_ptr<bool> closeOnTimeout(asio::steady_timer& timer, tcp::socket& socket,
                                     std::chrono::milliseconds after) {
  auto done = std::make_shared<bool>(false);
  timer.expires_after(after);
  timer.async_wait([&socket, done](boost::system::error_code ec) {
    if (!ec && !*done) {
      countLimit(Limit::kHeaderTimeout);
      socket.close(ec);
    }
  });
  return done;
}

// Plaintext: HTTP/2 prior knowledge starts with the 24-byte client preface.
// Compare the bytes (a request line could be 24 bytes long too); read more only
// while what arrived is still a prefix of the preface.
Task<void> detectPlaintext(tcp::socket socket, SessionContext context, Handler handler) {
  asio::steady_timer timer(socket.get_executor());
  auto timerDone = closeOnTimeout(timer, socket, context.config->headerTimeout);
  struct SetOnExit {
    std::shared_ptr<bool> flag;
    ~SetOnExit() { *flag = true; }
  } guard{timerDone};
  std::string initial;
  char buf[4096];
  bool h2 = false;
  for (;;) {
    auto [ec, n] = co_await socket.async_read_some(asio::buffer(buf), kTuple);
    if (ec) co_return;  // closed before saying anything (or timed out)
    initial.append(buf, n);
    std::size_t cmp = std::min(initial.size(), kH2Preface.size());
    if (initial.compare(0, cmp, kH2Preface, 0, cmp) != 0) break;  // HTTP/1.x
    if (initial.size() >= kH2Preface.size()) {
      h2 = true;
      break;
    }
  }
  *timerDone = true;
  timer.cancel();
  if (h2) {
    startHttp2(std::move(socket), std::move(initial), std::move(context), std::move(handler));
  } else {
    startHttp1(std::move(socket), std::move(initial), std::move(context), std::move(handler));
  }
}

// A TLS listener's context; a reload swaps it, and each new handshake takes
// the current one (connections already open keep theirs).
struct TlsSlot {
  std::mutex mutex;
  std::shared_ptr<asio::ssl::context> context;
  std::shared_ptr<asio::ssl::context> current() {
    std::lock_guard lock(mutex);
    return context;
  }
};

Task<void> handshakeTls(tcp::socket socket, std::shared_ptr<asio::ssl::context> tls,
                        SessionContext context, Handler handler) {
  TlsStream stream(std::move(socket), *tls);
  asio::steady_timer timer(stream.get_executor());
  auto timerDone = closeOnTimeout(timer, stream.next_layer(), context.config->headerTimeout);
  auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, kTuple);
  *timerDone = true;
  timer.cancel();
  if (ec) co_return;  // scanners, wrong protocol, expired: nothing to answer
  if (negotiatedAlpn(stream.native_handle()) == "h2") {
    startHttp2(std::move(stream), std::move(context), std::move(handler));
  } else {
    startHttp1(std::move(stream), std::move(context), std::move(handler));
  }
}

}  // namespace

void checkTlsFiles(const TlsFiles& files) {
  makeServerTlsContext(files.certFile, files.keyFile, true);
}

struct Runtime::Impl {
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::chrono::microseconds busyPoll{0};  // server.busy_poll_us (event_loop.hpp)
  std::vector<WorkGuard> guards;
  std::mutex acceptorsMutex;
  std::vector<std::shared_ptr<tcp::acceptor>> acceptors;
  std::vector<std::unique_ptr<SessionRegistry>> registries;  // one per worker
  std::map<std::string, std::shared_ptr<TlsSlot>> tlsSlots;  // by configured address
  std::map<std::string, std::shared_ptr<ConnectionLimits>> connectionLimits;  // by group

  Task<void> acceptLoop(std::shared_ptr<tcp::acceptor> acceptor, SessionContext context,
                        std::shared_ptr<TlsSlot> tls, std::shared_ptr<ConnectionLimits> limits,
                        Handler handler) {
    auto executor = acceptor->get_executor();
    for (;;) {
      auto [ec, socket] = co_await acceptor->async_accept(kTuple);
      if (ec) {
        if (!acceptor->is_open() || ec == asio::error::operation_aborted) co_return;
        // EMFILE and friends: back off instead of spinning.
        asio::steady_timer pause(executor, std::chrono::milliseconds(50));
        co_await pause.async_wait(kTuple);
        continue;
      }
      boost::system::error_code ignored;
      tcp::endpoint peer = socket.remote_endpoint(ignored);
      SessionContext connection = context;
      connection.acceptedAt = SteadyClock::now();
      connection.slot = limits->admit(peer);
      if (!connection.slot) {
        socket.close(ignored);  // over max_connections(_per_ip): counted by admit()
        continue;
      }
      socket.set_option(tcp::no_delay(true), ignored);
      if (tls) {
        asio::co_spawn(
            executor,
            handshakeTls(std::move(socket), tls->current(), std::move(connection), handler),
            asio::detached);
      } else {
        asio::co_spawn(executor, detectPlaintext(std::move(socket), std::move(connection), handler),
                       asio::detached);
      }
    }
  }
};

Runtime::Runtime(unsigned workers, std::chrono::microseconds busyPoll)
    : impl_(std::make_unique<Impl>()) {
  impl_->busyPoll = busyPoll;
  if (workers == 0) workers = usableCores();
  for (unsigned i = 0; i < workers; ++i) {
    // Each context is run by its own thread only, and its sockets are touched
    // only from it: the reactor needs no locking. Posting from other threads
    // (reload, drain) stays safe: the scheduler keeps its lock.
    impl_->contexts.push_back(
        std::make_unique<asio::io_context>(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO));
    impl_->guards.emplace_back(impl_->contexts.back()->get_executor());
    impl_->registries.push_back(std::make_unique<SessionRegistry>());
  }
}

Runtime::~Runtime() {
  shutdown();
}

void Runtime::shutdown() {
  // Order matters: acceptors and work guards refer to their context; sessions
  // in the contexts refer to the registries, which Impl would
  // otherwise destroy first (they are declared after the contexts).
  {
    std::lock_guard lock(impl_->acceptorsMutex);
    impl_->acceptors.clear();
    impl_->tlsSlots.clear();
    impl_->connectionLimits.clear();
  }
  impl_->guards.clear();
  for (auto& ctx : impl_->contexts)
    ctx.reset();
}

unsigned Runtime::workers() const {
  return static_cast<unsigned>(impl_->contexts.size());
}

asio::io_context& Runtime::context(unsigned worker) {
  return *impl_->contexts.at(worker);
}

std::int64_t Runtime::activeExchanges() const {
  std::int64_t n = 0;
  for (const auto& r : impl_->registries)
    n += r->activeExchanges.load(std::memory_order_relaxed);
  return n;
}

config::Endpoint Runtime::listen(const ListenerOptions& options,
                                 const std::function<Handler(unsigned worker)>& handlerFor) {
  auto config = std::make_shared<SessionConfig>();
  config->maxRequestBytes = options.maxRequestBytes;
  config->maxHeaderBytes = options.maxHeaderBytes;
  config->maxConnectionBodyBytes =
      std::max(options.maxConnectionBodyBytes, options.maxRequestBytes);
  config->headerTimeout = std::chrono::milliseconds(options.headerTimeoutMs);
  config->bodyTimeout = std::chrono::milliseconds(options.bodyTimeoutMs);
  config->idleTimeout = std::chrono::milliseconds(options.idleTimeoutMs);
  config->http2 = options.http2;
  config->tls = options.tls.has_value();

  std::shared_ptr<TlsSlot> tls;
  if (options.tls) {
    tls = std::make_shared<TlsSlot>();
    tls->context = makeServerTlsContext(options.tls->certFile, options.tls->keyFile, true);
  }

  std::shared_ptr<ConnectionLimits> limits;
  {
    std::lock_guard lock(impl_->acceptorsMutex);
    if (tls) impl_->tlsSlots[options.address.text()] = tls;
    auto& group = impl_->connectionLimits[options.connectionGroup];
    if (!group) {
      group =
          std::make_shared<ConnectionLimits>(options.maxConnections, options.maxConnectionsPerIp);
    }
    limits = group;
  }
  tcp::endpoint endpoint = resolveEndpoint(options.address);
  config::Endpoint bound = options.address;
  if (endpoint.port() != 0) {
    // SO_REUSEPORT would let us share a port another process already serves
    // (the kernel would split its connections between us): probe without it.
    tcp::acceptor probe(*impl_->contexts[0]);
    boost::system::error_code ec;
    probe.open(endpoint.protocol(), ec);
    if (!ec) probe.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) probe.bind(endpoint, ec);
    if (ec) {
      throw std::runtime_error("cannot listen on " + options.address.text() + " (" + options.name +
                               "): " + ec.message());
    }
  }
  for (unsigned i = 0; i < workers(); ++i) {
    auto acceptor = std::make_shared<tcp::acceptor>(*impl_->contexts[i]);
    boost::system::error_code ec;
    acceptor->open(endpoint.protocol(), ec);
    if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) {
      int one = 1;
      if (::setsockopt(acceptor->native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        ec.assign(errno, boost::system::system_category());
    }
    if (!ec && options.sendBufferBytes != 0) {
      const int bytes = static_cast<int>(options.sendBufferBytes);
      acceptor->set_option(asio::socket_base::send_buffer_size(bytes), ec);
    }
    if (!ec) acceptor->bind(endpoint, ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      throw std::runtime_error("cannot listen on " + options.address.text() + " (" + options.name +
                               "): " + ec.message());
    }
    if (i == 0) {
      endpoint.port(acceptor->local_endpoint().port());  // port 0: every worker shares it
      bound.port = endpoint.port();
    }
    if (options.drains) {
      std::lock_guard lock(impl_->acceptorsMutex);
      impl_->acceptors.push_back(acceptor);
    }
    // Sessions of a listener that does not drain are not registered for it.
    SessionRegistry* registry = options.drains ? impl_->registries[i].get() : nullptr;
    asio::co_spawn(*impl_->contexts[i],
                   impl_->acceptLoop(acceptor, SessionContext{config, registry, {}, {}}, tls,
                                     limits, handlerFor(i)),
                   asio::detached);
  }
  return bound;
}

void Runtime::run() {
  const auto loop = [this](unsigned i) {
    runEventLoop(*impl_->contexts[i], impl_->busyPoll,
                 [] { return std::chrono::steady_clock::now(); });
  };
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < workers(); ++i) {
    threads.emplace_back(loop, i);
  }
  loop(0);
  for (auto& t : threads)
    t.join();
}

bool Runtime::reloadTls(const config::Endpoint& address, const TlsFiles& files) {
  std::shared_ptr<TlsSlot> slot;
  {
    std::lock_guard lock(impl_->acceptorsMutex);
    auto it = impl_->tlsSlots.find(address.text());
    if (it == impl_->tlsSlots.end()) return false;
    slot = it->second;
  }
  auto fresh = makeServerTlsContext(files.certFile, files.keyFile, true);  // throws on a bad file
  std::lock_guard lock(slot->mutex);
  slot->context = std::move(fresh);
  return true;
}

void Runtime::stopAccepting() {
  std::lock_guard lock(impl_->acceptorsMutex);
  for (auto& acceptor : impl_->acceptors) {
    asio::post(acceptor->get_executor(), [acceptor] {
      boost::system::error_code ec;
      acceptor->close(ec);
    });
  }
  for (unsigned i = 0; i < workers(); ++i) {
    asio::post(*impl_->contexts[i], [registry = impl_->registries[i].get()] {
      registry->draining = true;
      // drain() may close a session, which unregisters it: iterate a copy.
      std::vector<Drainable*> sessions(registry->live.begin(), registry->live.end());
      for (Drainable* s : sessions) {
        if (registry->live.count(s)) s->drain();
      }
    });
  }
}

void Runtime::stop() {
  for (auto& ctx : impl_->contexts)
    ctx->stop();
}

}  // namespace relay::net
