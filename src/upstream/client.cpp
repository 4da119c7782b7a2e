// HTTP/1.1 client: connect (TCP, TLS with verification and SNI), write one
// request, read its head, then its body piece by piece. Connections go back to
// the worker's pool only after a body was read to its end with keep-alive.
#include "relay/upstream/client.hpp"

#include <array>
#include <cerrno>
#include <charconv>
#include <optional>
#include <sys/socket.h>
#include <sys/uio.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <boost/beast/http/error.hpp>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "connection.hpp"
#include "relay/common/limits.hpp"
#include "relay/net/edge_read.hpp"
#include "relay/net/http1_parser.hpp"
#include "resolver.hpp"

namespace relay::upstream {
namespace {

namespace http = boost::beast::http;
namespace beast = boost::beast;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

Clock::time_point earliest(Clock::time_point a, Clock::time_point b) {
  return a < b ? a : b;
}

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

// The request head into `out` (cleared first).
void serializeRequest(const OutgoingRequest& req, const Target& target, std::string& out) {
  using namespace std::string_view_literals;
  out.clear();
  out.reserve(256 + req.sharedHead.size() + req.headers.size() * 64);
  out.append(req.method).append(" "sv).append(req.path).append(" HTTP/1.1\r\n"sv);
  appendField(out, "host"sv, target.hostHeader);
  out.append(req.sharedHead);
  if (!req.authorization.empty()) appendField(out, "authorization"sv, req.authorization);
  for (const HeaderField& f : req.headers)
    appendField(out, f.name, f.value);
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT") {
    char digits[24];
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, req.body.size());
    appendField(out, "content-length"sv, std::string_view(digits, end - digits));
  }
  out.append("\r\n"sv);
}

// The thread's buffer for request heads: a head is made in it and written at
// once, so one buffer serves every request of the thread (kept unless a huge
// head made it grow past 16 KiB). A head that does not go whole at once
// leaves it for its own string before the coroutine waits.
std::string& headScratch() {
  thread_local std::string scratch;
  if (scratch.capacity() > 16 * 1024) std::string().swap(scratch);
  return scratch;
}

// One non-blocking sendmsg of `bufs`: the bytes it took (0 when the socket
// had no room); `ec` set only for a real failure (the peer reset, ...).
std::size_t sendNow(int fd, const std::array<asio::const_buffer, 2>& bufs,
                    boost::system::error_code& ec) {
  iovec iov[2];
  std::size_t count = 0;
  for (const asio::const_buffer& b : bufs) {
    if (b.size() == 0) continue;
    iov[count].iov_base = const_cast<void*>(b.data());
    iov[count].iov_len = b.size();
    ++count;
  }
  if (count == 0) return 0;
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = count;
  const ssize_t sent = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent >= 0) return static_cast<std::size_t>(sent);
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    ec.assign(errno, boost::system::system_category());
  return 0;
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

struct ClientPool::Impl {
  std::vector<UpstreamSpec> upstreams;
  std::vector<std::shared_ptr<asio::ssl::context>> tls;
  std::vector<std::vector<std::unique_ptr<Connection>>> idle;
  Options options;

  std::unique_ptr<Connection> takeIdle(std::size_t index) {
    auto& list = idle[index];
    auto now = Clock::now();
    while (!list.empty()) {
      std::unique_ptr<Connection> c = std::move(list.back());
      list.pop_back();
      auto idle = now - c->idleSince;
      // A connection handed back a moment ago is alive; only one that sat idle
      // may have been closed by the upstream (one peek, no read consumed).
      if (c->buffer.size() == 0 && idle < options.maxIdleTime &&
          (idle < std::chrono::seconds(1) || !c->looksDead()))
        return c;
    }
    return nullptr;
  }

  void giveBack(std::unique_ptr<Connection> c) {
    auto& list = idle[c->upstream];
    if (list.size() >= options.maxIdlePerUpstream) return;
    c->idleSince = Clock::now();
    list.push_back(std::move(c));
  }

  Task<std::unique_ptr<Connection>> connect(std::size_t index, const Deadlines& d,
                                            Failure& failure);
};

namespace {

// The upstream response parser: each field goes straight into the
// exchange's Headers, and body bytes straight into the string the caller
// reads into (no copy of the head, no body buffer of the parser's).
class UpstreamParser final : public net::http1::Parser {
 public:
  explicit UpstreamParser(Headers& headers) : Parser(/*request=*/false), headers_(headers) {}
  // Where body bytes go during the next put()/putEof().
  void bodyTo(std::string* sink) { sink_ = sink; }

 private:
  void onStartLine(std::string_view, std::string_view, int) override {}
  // Head fields only: a chunked body's trailer fields never reach here, so a
  // Retry-After or X-Should-Retry there cannot steer a retry.
  void onField(net::http1::FieldName, std::string_view name, std::string_view value) override {
    headers_.add(name, value);
  }
  void onBody(std::string_view body) override {
    if (sink_) sink_->append(body);
  }

  Headers& headers_;
  std::string* sink_ = nullptr;
};

class ResponseStreamImpl final : public ResponseStream {
 public:
  ResponseStreamImpl(std::shared_ptr<ClientPool::Impl> pool, std::unique_ptr<Connection> conn,
                     const Deadlines& deadlines)
      : pool_(std::move(pool)),
        conn_(std::move(conn)),
        deadlines_(deadlines),
        watchdog_(*conn_->watchdogs) {
    watchdog_.watch(&conn_->socket());
    newParser();
  }

  // Writes the request and reads the response head.
  Task<bool> exchangeHead(const OutgoingRequest& req, const Target& target) {
    const Clock::time_point firstByteBy = Clock::now() + deadlines_.firstByte;
    watchdog_.set(earliest(firstByteBy, deadlines_.total), firstByteBy < deadlines_.total
                                                               ? FailureKind::kFirstByteTimeout
                                                               : FailureKind::kTotalTimeout);
    std::string& scratch = headScratch();
    serializeRequest(req, target, scratch);
    const std::size_t headSize = scratch.size();
    std::array<asio::const_buffer, 2> bufs{asio::buffer(scratch), asio::buffer(req.body)};
    // Plain TCP: one sendmsg now, which nearly always takes the whole
    // request, and no round through the scheduler; what did not fit (and
    // every TLS write) goes through the asynchronous write.
    requestBytesWritten_ = 0;
    if (conn_->plain) {
      boost::system::error_code sec;
      requestBytesWritten_ = sendNow(conn_->plain->native_handle(), bufs, sec);
      if (sec) co_return fail(FailureKind::kReset, sec.message());
    }
    if (requestBytesWritten_ < headSize + req.body.size()) {
      // The rest waits for room: the head leaves the thread's buffer, which
      // another request may use meanwhile.
      std::string head = scratch;
      bufs[0] = asio::buffer(head);
      beast::buffers_suffix<std::array<asio::const_buffer, 2>> rest(bufs);
      rest.consume(requestBytesWritten_);
      auto [wec, wn] =
          co_await conn_->visit([&](auto& s) { return asio::async_write(s, rest, kTuple); });
      requestBytesWritten_ += wn;
      if (wec) co_return fail(FailureKind::kReset, wec.message());
    }
    // An interim answer (100 Continue, 103 Early Hints) is followed by the
    // final one on the same connection: read on to it. Left unread, that
    // answer would reach whoever uses the connection next.
    for (int interims = 0;;) {
      boost::system::error_code ec = co_await readHead();
      if (ec) {
        if (ec == http::error::end_of_stream || ec == asio::error::eof ||
            ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
            ec == asio::error::bad_descriptor)
          co_return fail(FailureKind::kReset, ec.message(), ec);
        if (ec == http::error::header_limit)
          co_return fail(FailureKind::kProtocol,
                         "the upstream's response head is larger than " +
                             std::to_string(kMaxHeadBytes) + " bytes",
                         ec);
        co_return fail(FailureKind::kProtocol, ec.message(), ec);
      }
      status_ = parser_->status();
      if (status_ / 100 != 1 || status_ == 101) break;
      if (++interims > kMaxInterimAnswers)
        co_return fail(FailureKind::kProtocol, "more than " + std::to_string(kMaxInterimAnswers) +
                                                   " interim (1xx) answers");
      headers_ = Headers{};
      newParser();
    }
    // From here on one put() takes every chunk the buffer holds (before the
    // head, it must stop there: no body sink is set yet).
    parser_->eager(true);
    co_return true;
  }

  // True when not one byte of the request reached the socket: only then may
  // it be sent again without counting as an attempt (the upstream cannot
  // have seen it, so it cannot have run or billed it).
  bool nothingSent() const { return requestBytesWritten_ == 0; }

  void abort() override {
    aborted_ = true;
    if (!conn_) return;
    boost::system::error_code ignored;
    conn_->socket().close(ignored);
  }

  int status() const override { return status_; }
  const Headers& headers() const override { return headers_; }
  const Failure& failure() const override { return failure_; }

  Task<bool> read(std::string& out) override {
    std::size_t got = 0;
    while (!done_) {
      // What is buffered first: a burst arrives as many chunks in one socket
      // read, and one read() returns all of it.
      if (auto ec = parseBuffered(out, got)) {
        fail(FailureKind::kReset, ec.message(), ec);
        co_return false;
      }
      if (parser_->done()) {
        finishBody();  // the body's end came with these bytes (or before)
        co_return got > 0;
      }
      if (got > 0) {
        // Until the next read, time passes at the caller's pace (a slow
        // reader, a closed window), not the upstream's: only the total
        // deadline runs.
        watchdog_.set(deadlines_.total, FailureKind::kTotalTimeout);
        co_return true;
      }
      auto now = Clock::now();
      bool idleFirst = now + deadlines_.idle < deadlines_.total;
      watchdog_.set(earliest(now + deadlines_.idle, deadlines_.total),
                    idleFirst ? FailureKind::kIdleTimeout : FailureKind::kTotalTimeout);
      boost::system::error_code ec;
      if (conn_->tls) {
        // TLS may hold decrypted bytes the socket no longer signals: read
        // through the stream, into the connection's buffer.
        auto [rec, n] = co_await conn_->tls->async_read_some(
            conn_->buffer.prepare(Connection::kReadBytes), kTuple);
        conn_->buffer.commit(n);
        if (n == 0) ec = rec;
      } else {
        // Plain TCP: an edge read (relay/net/edge_read.hpp). While it waits
        // it holds no buffer (an open stream between events costs its socket
        // only); parseBuffered() above takes what it brought and gives the
        // buffer back.
        auto [rec, n] = co_await net::asyncEdgeRead(*conn_->plain, conn_->buffer,
                                                    Connection::kReadBytes, kTuple);
        if (n == 0) ec = rec;
      }
      if (ec == asio::error::eof && conn_->buffer.size() == 0) {
        // A body that runs to the connection's close ends here; any other
        // is cut short.
        boost::system::error_code eofEc;
        parser_->putEof(eofEc);
        if (eofEc) {
          fail(FailureKind::kReset, eofEc.message(), eofEc);
          co_return false;
        }
        continue;
      }
      if (ec) {
        fail(FailureKind::kReset, ec.message(), ec);
        co_return false;
      }
    }
    co_return false;
  }

  bool complete() const override { return done_; }

  // At most this many 1xx answers before the final one (each has its own
  // head limit; all of them fall under the first-byte deadline).
  static constexpr int kMaxInterimAnswers = 8;
  // One head (status line to the blank line that ends it) is at most this
  // long; the connection buffer then holds at most this plus one read.
  static constexpr std::size_t kMaxHeadBytes = 64 * 1024;

  // Reads one head. What the connection buffer holds is parsed first; then,
  // on plain TCP, one edge read into it (one recv per arrival), and on TLS
  // one read through the stream (it may hold decrypted bytes the socket no
  // longer signals). Errors as Beast's read gave them: end_of_stream when the
  // upstream closed before a byte, partial_message within the head.
  //
  // The bound is on the whole head, however it arrives: the parser takes
  // nothing of a head until it has ended, and a head that has not ended
  // within kMaxHeadBytes is header_limit, one byte over or a megabyte.
  Task<boost::system::error_code> readHead() {
    for (;;) {
      if (conn_->buffer.size() > 0) {
        boost::system::error_code ec;
        const std::size_t used = parser_->put(net::bufferView(conn_->buffer), ec);
        conn_->buffer.consume(used);
        if (ec != http::error::need_more) co_return ec;  // the head, or what is wrong with it
      }
      std::size_t n = 0;
      boost::system::error_code rec;
      if (conn_->plain) {
        auto [pec, pn] = co_await net::asyncEdgeRead(*conn_->plain, conn_->buffer,
                                                     Connection::kReadBytes, kTuple);
        n = pn;
        rec = pec;
      } else {
        auto [tec, tn] = co_await conn_->tls->async_read_some(
            conn_->buffer.prepare(Connection::kReadBytes), kTuple);
        conn_->buffer.commit(tn);
        n = tn;
        rec = tec;
      }
      if (n > 0) continue;
      if (rec == asio::error::eof || rec == asio::ssl::error::stream_truncated) {
        if (!parser_->gotSome()) co_return http::error::end_of_stream;
        boost::system::error_code ec;
        parser_->putEof(ec);
        co_return ec ? ec : http::error::partial_message;
      }
      if (rec) co_return rec;
    }
  }

  void newParser() {
    parser_.emplace(headers_);
    parser_->headerLimit(kMaxHeadBytes);
    parser_->bodyLimit(std::nullopt);  // SSE streams have no end we could cap
  }

  // Parses the bytes in the connection's buffer into `out` (adding their
  // count to `got`) without waiting for more.
  boost::system::error_code parseBuffered(std::string& out, std::size_t& got) {
    if (conn_->buffer.size() == 0) return {};
    boost::system::error_code ec;
    conn_->buffer.consume(parse(net::bufferView(conn_->buffer), out, got, ec));
    // On plain TCP an emptied buffer gives its memory back (the next edge
    // read prepares it again when bytes arrive); TLS reads into it every time.
    if (conn_->buffer.size() == 0 && !conn_->tls) conn_->buffer.shrink_to_fit();
    return ec;
  }

  // Body bytes of `in` into `out` (the parser appends them as it goes).
  // Returns the bytes of `in` used.
  std::size_t parse(std::string_view in, std::string& out, std::size_t& got,
                    boost::system::error_code& error) {
    const std::size_t before = out.size();
    parser_->bodyTo(&out);
    std::size_t usedTotal = 0;
    while (!parser_->done() && in.size() > 0) {
      boost::system::error_code ec;
      const std::size_t used = parser_->put(in, ec);
      in.remove_prefix(used);
      usedTotal += used;
      if (ec == http::error::need_more) break;
      if (ec) {
        error = ec;
        break;
      }
      if (used == 0) break;
    }
    parser_->bodyTo(nullptr);
    got += out.size() - before;
    return usedTotal;
  }

  Task<bool> readAll(std::string& out, std::uint64_t limit) override {
    // A length the head declares for a body still to come. An answer to
    // which no body belongs (204, 304) may declare one too, for the body it
    // would have had: that is neither room to make nor over the limit.
    if (auto len = parser_->contentLength(); len && !parser_->done()) {
      if (*len > limit) co_return tooLarge(limit);
      out.reserve(out.size() + *len);
    }
    const std::size_t start = out.size();
    while (co_await read(out)) {
      if (out.size() - start > limit) co_return tooLarge(limit);
    }
    co_return !failure_;
  }

 private:
  // A body over the cap is not read further: the connection is dropped.
  bool tooLarge(std::uint64_t limit) {
    countLimit(Limit::kUpstreamResponseBytes);
    fail(FailureKind::kTooLarge,
         "over " + std::to_string(limit) + " bytes, the upstream's max_response_bytes");
    return false;
  }

  bool fail(FailureKind kind, std::string detail, boost::system::error_code ec = {}) {
    done_ = true;
    FailureKind fired = watchdog_.fired();
    // Aborted with no deadline passed and no shutdown abort(): our caller left.
    if (fired == FailureKind::kNone && ec == asio::error::operation_aborted && !aborted_)
      kind = FailureKind::kCancelled;
    failure_.kind = fired != FailureKind::kNone ? fired : kind;
    failure_.detail = fired != FailureKind::kNone ? std::string() : std::move(detail);
    watchdog_.disarm();
    conn_.reset();  // never reuse a connection in an unknown state
    return false;
  }

  void finishBody() {
    done_ = true;
    watchdog_.disarm();
    // Bytes past the response's end mean the upstream broke its own framing:
    // such a connection must never carry another request's answer.
    if (parser_->keepAlive() && conn_ && conn_->buffer.size() == 0 &&
        (!conn_->tls || SSL_pending(conn_->tls->native_handle()) == 0))
      pool_->giveBack(std::move(conn_));
  }

  std::shared_ptr<ClientPool::Impl> pool_;
  std::unique_ptr<Connection> conn_;
  Deadlines deadlines_;
  Watchdog watchdog_;
  Headers headers_;  // before parser_, which fills it
  std::optional<UpstreamParser> parser_;
  int status_ = 0;
  Failure failure_;
  bool done_ = false;
  bool aborted_ = false;  // abort() closed the connection (shutdown), not the caller leaving
  std::size_t requestBytesWritten_ = 0;
};

}  // namespace

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
  auto connectBy = earliest(Clock::now() + d.connect, d.total);
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

ClientPool::ClientPool(std::vector<UpstreamSpec> upstreams, Options options)
    : impl_(std::make_shared<Impl>()) {
  impl_->tls.resize(upstreams.size());
  impl_->idle.resize(upstreams.size());
  impl_->upstreams = std::move(upstreams);
  impl_->options = options;
}

ClientPool::~ClientPool() = default;

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
    std::unique_ptr<Connection> conn = impl->takeIdle(index);
    bool reused = conn != nullptr;
    if (!reused) {
      conn = co_await impl->connect(index, deadlines, failure);
      if (!conn) co_return nullptr;
    }
    auto stream = std::make_unique<ResponseStreamImpl>(impl, std::move(conn), deadlines);
    if (co_await stream->exchangeHead(request, target)) co_return stream;
    failure = stream->failure();
    // Only a stale pooled connection is worth a second try (a cancelled attempt
    // is kCancelled, never retried here).
    if (!(reused && failure.kind == FailureKind::kReset && stream->nothingSent())) break;
  }
  co_return nullptr;
}

}  // namespace relay::upstream
