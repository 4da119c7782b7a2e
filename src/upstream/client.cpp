// The upstream connection pool: connect (TCP, TLS with verification and
// SNI), keep idle connections per upstream, and hand each request to an
// Exchange (exchange.hpp) on a pooled or new connection. Connections come
// back to the pool only after a body was read to its end with keep-alive.
#include "relay/upstream/client.hpp"

#include <algorithm>
#include <deque>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "connection.hpp"
#include "exchange.hpp"
#include "relay/common/coarse_clock.hpp"
#include "resolver.hpp"

namespace relay::upstream {
namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

bool isIpLiteral(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

std::shared_ptr<asio::ssl::context> makeClientTlsContext(const std::string& caFile) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_verify_mode(asio::ssl::verify_peer);
  if (caFile.empty()) {
    ctx->set_default_verify_paths();
  } else {
    ctx->load_verify_file(caFile);
  }
  static constexpr unsigned char kAlpn[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(ctx->native_handle(), kAlpn, sizeof kAlpn);
  return ctx;
}

}  // namespace

std::string_view failureClass(FailureKind kind) {
  switch (kind) {
    case FailureKind::kConnect:
    case FailureKind::kTls:
      return "connect_error";
    case FailureKind::kConnectTimeout:
    case FailureKind::kFirstByteTimeout:
    case FailureKind::kIdleTimeout:
    case FailureKind::kTotalTimeout:
      return "timeout";
    case FailureKind::kReset:
      return "reset";
    case FailureKind::kProtocol:
      return "protocol_error";
    case FailureKind::kCancelled:
      return "cancelled";
    case FailureKind::kTooLarge:
      return "too_large";
    case FailureKind::kNone:
      break;
  }
  return "none";
}

std::string describe(const Failure& f) {
  std::string what;
  switch (f.kind) {
    case FailureKind::kConnect:
      what = "connection failed";
      break;
    case FailureKind::kTls:
      what = "TLS handshake failed";
      break;
    case FailureKind::kConnectTimeout:
      what = "connect timeout";
      break;
    case FailureKind::kFirstByteTimeout:
      what = "first byte timeout";
      break;
    case FailureKind::kIdleTimeout:
      what = "idle timeout between chunks";
      break;
    case FailureKind::kTotalTimeout:
      what = "total request timeout";
      break;
    case FailureKind::kReset:
      what = "connection closed by upstream";
      break;
    case FailureKind::kProtocol:
      what = "invalid HTTP response";
      break;
    case FailureKind::kCancelled:
      what = "cancelled: the caller left";
      break;
    case FailureKind::kTooLarge:
      what = "response body too large";
      break;
    case FailureKind::kNone:
      return "no failure";
  }
  if (!f.detail.empty()) what += " (" + f.detail + ")";
  return what;
}

struct ClientPool::Impl final : ConnectionHome {
  std::vector<UpstreamSpec> upstreams;
  std::vector<std::shared_ptr<asio::ssl::context>> tls;
  // Per upstream, the oldest at the front: the next request takes the
  // newest (the likeliest alive); handing one back closes those at the front
  // past maxIdleTime (an upstream's keep-alive timeout closes its side of
  // them: ours would otherwise stay open until the list drained to them).
  std::vector<std::deque<std::unique_ptr<Connection>>> idle;
  // Set by retire(): nothing more is kept idle.
  bool retired = false;

  std::unique_ptr<Connection> takeIdle(std::size_t index, Clock::time_point now) {
    auto& list = idle[index];
    while (!list.empty()) {
      std::unique_ptr<Connection> c = std::move(list.back());
      list.pop_back();
      auto idle = now - c->idleSince;
      // A connection handed back a moment ago is alive; only one that sat idle
      // may have been closed by the upstream (one peek, no read consumed).
      if (c->buffer.size() == 0 && idle < upstreams[index].maxIdleTime &&
          (idle < std::chrono::seconds(1) || !c->looksDead()))
        return c;
    }
    return nullptr;
  }

  // Closes upstream `index`'s connections idle since before `now - maxIdleTime`.
  void closeStale(std::size_t index, Clock::time_point now) {
    auto& list = idle[index];
    while (!list.empty() && now - list.front()->idleSince >= upstreams[index].maxIdleTime)
      list.pop_front();
  }

  void giveBack(std::unique_ptr<Connection> c) override {
    if (retired) return;  // closed as `c` goes
    auto& list = idle[c->upstream];
    // The coarse clock (a few milliseconds behind, never ahead): idle times
    // are compared with a second and with maxIdleTime, and the precise
    // clock would cost a time stamp counter read on every request.
    const Clock::time_point now = coarseSteadyNow();
    closeStale(c->upstream, now);
    if (list.size() >= upstreams[c->upstream].maxIdle) return;  // closed as `c` goes
    c->idleSince = now;
    list.push_back(std::move(c));
  }

  Task<std::unique_ptr<Connection>> connect(std::size_t index, const Deadlines& d,
                                            Failure& failure);
};

Task<std::unique_ptr<Connection>> ClientPool::Impl::connect(std::size_t index, const Deadlines& d,
                                                            Failure& failure) {
  auto executor = co_await asio::this_coro::executor;
  const UpstreamSpec& spec = upstreams[index];
  auto conn = std::make_unique<Connection>();
  conn->upstream = index;
  conn->plain.emplace(executor);
  Watchdog watchdog(executor);
  conn->watchdogs = &watchdog.list();
  watchdog.watch(&*conn->plain);
  auto connectBy = std::min(Clock::now() + d.connect, d.total);
  watchdog.set(connectBy, FailureKind::kConnectTimeout);

  boost::system::error_code ec;
  if (isIpLiteral(spec.target.host)) {
    tcp::endpoint ep(asio::ip::make_address(spec.target.host), spec.target.port);
    std::tie(ec) = co_await conn->plain->async_connect(ep, kTuple);
  } else {
    // Bounded by the connect deadline and cancelled with the caller (resolver.hpp).
    detail::Resolved resolved =
        co_await detail::resolve(spec.target.host, spec.target.port, connectBy);
    if (resolved.failure) {
      failure = std::move(resolved.failure);
      co_return nullptr;
    }
    // The lookup ended at the connect deadline: the watchdog may have fired
    // already (on a socket not yet open, which it then no longer watches), and
    // the connect below would run with no deadline at all.
    if (watchdog.fired() != FailureKind::kNone || Clock::now() >= connectBy) {
      failure = {FailureKind::kConnectTimeout, ""};
      co_return nullptr;
    }
    tcp::endpoint ep;
    std::tie(ec, ep) = co_await asio::async_connect(*conn->plain, resolved.endpoints, kTuple);
  }
  if (ec) {
    FailureKind fired = watchdog.fired();
    if (fired == FailureKind::kNone && ec == asio::error::operation_aborted) {
      failure = {FailureKind::kCancelled, ""};
      co_return nullptr;
    }
    failure = {fired != FailureKind::kNone ? fired : FailureKind::kConnect,
               fired != FailureKind::kNone ? "" : ec.message()};
    co_return nullptr;
  }
  conn->plain->set_option(tcp::no_delay(true), ec);
  if (!spec.target.tls) co_return conn;

  if (!tls[index]) tls[index] = makeClientTlsContext(spec.caFile);
  conn->tls.emplace(std::move(*conn->plain), *tls[index]);
  conn->plain.reset();
  watchdog.watch(&conn->tls->next_layer());
  watchdog.set(connectBy, FailureKind::kConnectTimeout);  // the handshake shares the budget
  SSL* ssl = conn->tls->native_handle();
  if (isIpLiteral(spec.target.host)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), spec.target.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, spec.target.host.c_str());  // SNI
    SSL_set1_host(ssl, spec.target.host.c_str());             // certificate name check
  }
  auto [hec] = co_await conn->tls->async_handshake(asio::ssl::stream_base::client, kTuple);
  if (hec) {
    FailureKind fired = watchdog.fired();
    if (fired == FailureKind::kNone && hec == asio::error::operation_aborted) {
      failure = {FailureKind::kCancelled, ""};
      co_return nullptr;
    }
    failure = {fired != FailureKind::kNone ? fired : FailureKind::kTls,
               fired != FailureKind::kNone ? "" : hec.message()};
    co_return nullptr;
  }
  co_return conn;
}

ClientPool::ClientPool(std::vector<UpstreamSpec> upstreams) : impl_(std::make_shared<Impl>()) {
  impl_->tls.resize(upstreams.size());
  impl_->idle.resize(upstreams.size());
  impl_->upstreams = std::move(upstreams);
}

ClientPool::~ClientPool() = default;

void ClientPool::retire() {
  impl_->retired = true;
  for (auto& list : impl_->idle)
    list.clear();
}

void ClientPool::setIdleLimits(std::size_t index, std::size_t maxIdle,
                               std::chrono::milliseconds maxIdleTime) {
  impl_->upstreams.at(index).maxIdle = maxIdle;
  impl_->upstreams[index].maxIdleTime = maxIdleTime;
  auto& list = impl_->idle.at(index);
  while (list.size() > maxIdle)
    list.pop_front();
}

void ClientPool::closeStale(Clock::time_point now) {
  for (std::size_t i = 0; i < impl_->idle.size(); ++i)
    impl_->closeStale(i, now);
}

Task<std::unique_ptr<ResponseStream>> ClientPool::send(std::size_t index,
                                                       const OutgoingRequest& request,
                                                       const Deadlines& deadlines,
                                                       Failure& failure) {
  // The pool may be replaced by a config reload while this runs: hold its state.
  std::shared_ptr<Impl> impl = impl_;
  const Target& target = impl->upstreams.at(index).target;
  // A pooled connection may have been closed by the upstream an instant ago.
  // If writing to it failed before a byte of the request left, try once more
  // on a fresh one. Once any byte was written, a failure is the attempt's:
  // the upstream may have received the request (and run and billed it), so
  // only the retry policy, counting attempts, may send it again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    // The caller's reading serves the first pass; after a connect or a
    // failed write, time has passed.
    Clock::time_point now =
        attempt == 0 && deadlines.sentAt != Clock::time_point{} ? deadlines.sentAt : Clock::now();
    std::unique_ptr<Connection> conn = impl->takeIdle(index, now);
    bool reused = conn != nullptr;
    if (!reused) {
      conn = co_await impl->connect(index, deadlines, failure);
      if (!conn) co_return nullptr;
      now = Clock::now();
    }
    auto stream = std::make_unique<Exchange>(impl, std::move(conn), deadlines);
    // The exchange's steps (exchange.hpp), here rather than in a coroutine
    // of the exchange's: one frame fewer per request.
    std::optional<bool> head;
    if (stream->startRequest(request, target, now)) {
      bool sent = stream->requestSent();
      if (!sent) {
        Task<bool> rest = stream->finishRequest(request);  // named: no temporary in co_await
        sent = co_await std::move(rest);
      }
      if (sent) head = stream->headReady();
      while (sent && !head) {
        Task<std::tuple<boost::system::error_code, std::size_t>> read = stream->readHeadBytes();
        const std::tuple<boost::system::error_code, std::size_t> got = co_await std::move(read);
        head = stream->headAfter(got);
      }
    }
    if (head.value_or(false)) co_return stream;
    failure = stream->failure();
    // Only a stale pooled connection is worth a second try (a cancelled attempt
    // is kCancelled, never retried here).
    if (!(reused && failure.kind == FailureKind::kReset && stream->nothingSent())) break;
  }
  co_return nullptr;
}

}  // namespace relay::upstream
