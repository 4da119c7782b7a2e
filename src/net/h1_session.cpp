// HTTP/1.1 server session: bytes <-> Exchange.
//
// One reader coroutine owns the socket's read side for the connection's whole
// life. It feeds Beast's request parser and, when a request is complete, spawns
// the handler with a cancellation slot. While the handler runs the reader keeps
// reading, so an EOF or reset from the client is seen at once (even while the
// upstream is silent) and becomes a terminal cancellation of the handler; bytes
// of a pipelined next request are buffered (up to a cap) and parsed once the
// current response is complete. Responses are serialised here, not by Beast:
// a status line, the handler's fields and our framing, gathered into one write.
//
// Timeouts use one timer per connection and a "lazy" deadline: moving the
// deadline later is a plain store; only moving it earlier re-arms the timer.
#include <array>
#include <optional>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "relay/common/request_id.hpp"
#include "session_common.hpp"

namespace relay::net {
namespace {

namespace http = boost::beast::http;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kHeaderLimit = 64 * 1024;
constexpr std::size_t kReadChunk = 16 * 1024;
// Bytes of a following request we buffer while a response is in progress.
constexpr std::size_t kPipelineCap = 64 * 1024;
// After we decide to close, how long we keep draining the client's bytes so
// that our last response is not destroyed by a reset ("lingering close").
constexpr std::chrono::milliseconds kLingerTimeout{2'000};

using Parser = http::request_parser<http::string_body>;

template <class Stream>
class H1Session final : public ResponseSink,
                        public Drainable,
                        public std::enable_shared_from_this<H1Session<Stream>> {
 public:
  H1Session(Stream stream, std::string initial, SessionContext context, Handler handler)
      : stream_(std::move(stream)),
        config_(std::move(context.config)),
        handler_(std::move(handler)),
        timer_(stream_.get_executor()),
        registration_(context.registry, this) {
    if (!initial.empty()) {
      auto dest = buffer_.prepare(initial.size());
      std::memcpy(dest.data(), initial.data(), initial.size());
      buffer_.commit(initial.size());
    }
    peer_ = peerAddress(lowestLayer(stream_));
  }

  void start() {
    auto self = this->shared_from_this();
    boost::system::error_code ignored;
    lowestLayer(stream_).non_blocking(true, ignored);  // readSome() must never block
    if (registration_.draining()) keepAlive_ = false;
    setDeadline(SteadyClock::now() + config_->idleTimeout);
    asio::co_spawn(stream_.get_executor(), self->readLoop(), asio::detached);
    asio::co_spawn(stream_.get_executor(), self->watchdog(), asio::detached);
  }

  // ResponseSink ----------------------------------------------------------

  Task<bool> respond(ResponseHead head, std::string body) override {
    if (gone_ || started_) co_return false;
    started_ = true;
    std::string h = serializeHead(head, body.size(), false);
    std::array<asio::const_buffer, 2> bufs{asio::buffer(h), asio::buffer(body)};
    if (isHead_) bufs[1] = asio::const_buffer();
    finished_ = true;
    co_return co_await writeAll(bufs);
  }

  Task<bool> start(ResponseHead head) override {
    if (gone_ || started_) co_return false;
    started_ = true;
    chunked_ = !isHead_ && head.status >= 200 && head.status != 204 && head.status != 304;
    std::string h = serializeHead(head, 0, true);
    std::array<asio::const_buffer, 1> bufs{asio::buffer(h)};
    co_return co_await writeAll(bufs);
  }

  Task<bool> write(std::string_view bytes) override {
    if (gone_ || !started_ || finished_) co_return false;
    if (bytes.empty() || !chunked_) co_return true;
    char size[24];
    int n = std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
    std::array<asio::const_buffer, 3> bufs{asio::buffer(size, static_cast<std::size_t>(n)),
                                           asio::buffer(bytes.data(), bytes.size()),
                                           asio::buffer("\r\n", 2)};
    co_return co_await writeAll(bufs);
  }

  Task<bool> finish() override {
    if (gone_ || !started_ || finished_) co_return false;
    finished_ = true;
    if (!chunked_) co_return true;
    std::array<asio::const_buffer, 1> bufs{asio::buffer("0\r\n\r\n", 5)};
    co_return co_await writeAll(bufs);
  }

  void abort() override {
    gone_ = true;
    closing_ = true;
    resetConnection(lowestLayer(stream_));
  }

  bool started() const override { return started_; }
  bool clientGone() const override { return gone_; }

  // Drainable: the response in progress says `connection: close`; a
  // connection between requests is closed now.
  void drain() override {
    draining_ = true;
    if (!handlerRunning_ && !parser_ && !closing_) {
      closing_ = true;
      auto self = this->shared_from_this();
      asio::co_spawn(stream_.get_executor(), self->beginClose(), asio::detached);
    }
  }

 private:
  // `buffers` is a named object of the caller's frame (never a temporary in the
  // co_await expression: GCC 12 mishandles those).
  template <class Buffers>
  Task<bool> writeAll(const Buffers& buffers) {
    // A caller that stops reading must not hold its exchange (and the upstream
    // slot behind it) for ever: the watchdog resets a write stuck this long.
    writeDeadline_ = SteadyClock::now() + config_->idleTimeout;
    ++writesPending_;
    auto [ec, n] = co_await asio::async_write(stream_, buffers, kTuple);
    --writesPending_;
    if (ec) {
      gone_ = true;
      co_return false;
    }
    co_return true;
  }

  std::string serializeHead(const ResponseHead& head, std::size_t contentLength, bool streamed) {
    std::string out;
    out.reserve(256 + head.headers.size() * 48);
    out.append("HTTP/1.1 ");
    out.append(std::to_string(head.status));
    out.push_back(' ');
    out.append(reasonPhrase(head.status));
    out.append("\r\n");
    for (const HeaderField& f : head.headers) {
      if (isHopByHopHeader(f.name) || f.name == "content-length") continue;
      out.append(f.name).append(": ").append(f.value).append("\r\n");
    }
    if (streamed) {
      if (chunked_) out.append("transfer-encoding: chunked\r\n");
    } else if (head.status >= 200 && head.status != 204 && head.status != 304) {
      out.append("content-length: ").append(std::to_string(contentLength)).append("\r\n");
    }
    if (!keepAlive_ || closing_ || draining_) out.append("connection: close\r\n");
    out.append("\r\n");
    return out;
  }

  // Reader ----------------------------------------------------------------

  Task<void> readLoop() {
    auto self = this->shared_from_this();
    for (;;) {
      if (!handlerRunning_ && !closing_) {
        co_await parseBuffered();
        if (handlerRunning_) continue;
      }
      if (handlerRunning_ && buffer_.size() >= kPipelineCap) {
        co_await waitHandlerDone();
        continue;
      }
      if (closing_ && !handlerRunning_ && !lingering_ && writesPending_ == 0) {
        co_await beginClose();
      }
      auto [ec, n] = co_await readSome();
      if (ec) break;
      if (n == 0) continue;  // readiness without data (spurious wake-up)
      if (lingering_) buffer_.consume(buffer_.size());
      if (!handlerRunning_ && !lingering_ && !parser_)
        setDeadline(SteadyClock::now() + config_->headerTimeout);
    }
    // The client is gone (or we closed). A running handler learns it now.
    gone_ = true;
    if (handlerRunning_) {
      // Cancel only an unfinished response: a handler still settling after its
      // last byte went out has nothing to abandon.
      if (!finished_) cancel_->emit(asio::cancellation_type::terminal);
      co_await waitHandlerDone();
    }
    closeNow();
  }

  // One read. On plaintext it waits for readiness first and then reads
  // without blocking: a speculative read while a response is in progress
  // would almost always be an EAGAIN, i.e. one wasted system call per request.
  Task<std::tuple<boost::system::error_code, std::size_t>> readSome() {
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      auto [wec] = co_await stream_.async_wait(tcp::socket::wait_read, kTuple);
      if (wec) co_return std::tuple{wec, std::size_t{0}};
      boost::system::error_code ec;
      std::size_t n = stream_.read_some(buffer_.prepare(kReadChunk), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) ec = {};
      if (!ec) buffer_.commit(n);
      co_return std::tuple{ec, n};
    } else {
      // Into a buffer of our own: while this read is pending, a finished
      // handler may parse (and consume) buffer_, which would move the region
      // a read into buffer_.prepare() was given.
      auto [ec, n] = co_await stream_.async_read_some(asio::buffer(tlsScratch_), kTuple);
      if (!ec) {
        auto dest = buffer_.prepare(n);
        std::memcpy(dest.data(), tlsScratch_.data(), n);
        buffer_.commit(n);
      }
      co_return std::tuple{ec, n};
    }
  }

  // Parses whatever is buffered; may answer an error or start the handler.
  Task<void> parseBuffered() {
    if (parsing_) co_return;  // the reader and a finished handler may both get here
    parsing_ = true;
    co_await parseLoop();
    parsing_ = false;
  }

  Task<void> parseLoop() {
    while (buffer_.size() > 0 && !closing_) {
      if (!parser_) {
        parser_.emplace();
        parser_->header_limit(kHeaderLimit);
        parser_->body_limit(config_->maxRequestBytes);
        parser_->eager(true);
        sentContinue_ = false;
      }
      boost::system::error_code ec;
      std::size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == http::error::need_more) break;
      if (ec) {
        co_await answerParseError(ec);
        co_return;
      }
      if (parser_->is_header_done() && unframedTransferEncoding()) {
        boost::system::error_code bad = http::error::bad_transfer_encoding;
        co_await answerParseError(bad);
        co_return;
      }
      if (parser_->is_header_done() && !parser_->is_done()) {
        if (!sentContinue_ && expectsContinue()) {
          sentContinue_ = true;
          static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
          std::array<asio::const_buffer, 1> bufs{asio::buffer(kContinue.data(), kContinue.size())};
          if (!co_await writeAll(bufs)) {
            closing_ = true;
            co_return;
          }
        }
        if (used == 0) break;
        continue;
      }
      if (parser_->is_done()) {
        launchHandler();
        co_return;
      }
      if (used == 0) break;
    }
  }

  // A Transfer-Encoding whose last coding is not chunked leaves the body's
  // length unknowable (RFC 9112 §6.1 says 400 and close): whoever else reads
  // this connection could see a different request boundary.
  bool unframedTransferEncoding() const {
    const auto& req = parser_->get();
    return req.find(http::field::transfer_encoding) != req.end() && !parser_->chunked();
  }

  bool expectsContinue() const {
    auto it = parser_->get().find(http::field::expect);
    return it != parser_->get().end() && equalsIgnoreCase(it->value(), "100-continue");
  }

  Task<void> answerParseError(boost::system::error_code ec) {
    int status = 400;
    std::string message = "malformed HTTP/1.1 request: " + ec.message();
    if (ec == http::error::body_limit) {
      status = 413;
      message = "request body exceeds the limit of " + std::to_string(config_->maxRequestBytes) +
                " bytes (server.max_request_bytes)";
    } else if (ec == http::error::header_limit) {
      status = 431;
      message = "request header fields exceed " + std::to_string(kHeaderLimit) + " bytes";
    }
    ResponseHead head;
    head.status = status;
    head.headers.add("content-type", "application/json");
    std::string_view given;
    if (parser_->is_header_done()) {
      auto it = parser_->get().find("x-request-id");
      if (it != parser_->get().end()) given = it->value();
    }
    head.headers.add("x-request-id", requestIdFrom(given));
    parser_.reset();
    closing_ = true;
    keepAlive_ = false;
    started_ = false;
    const char* code = status == 413   ? "request_too_large"
                       : status == 431 ? "headers_too_large"
                                       : "bad_request";
    std::string body = openAiErrorJson(message, "invalid_request_error", code);
    co_await respond(std::move(head), std::move(body));
    // Half-close only now that the answer is out (the reader waits for it).
    if (!lingering_ && !gone_) co_await beginClose();
  }

  void launchHandler() {
    auto& req = parser_->get();
    exchange_.emplace();
    Exchange& ex = *exchange_;
    ex.head.method = std::string(req.method_string());
    std::string_view target = req.target();
    std::size_t q = target.find('?');
    ex.head.path = std::string(target.substr(0, q));
    if (q != std::string_view::npos) ex.head.query = std::string(target.substr(q + 1));
    ex.head.headers.reserve(std::distance(req.begin(), req.end()));
    // Fields the Connection header names belong to this hop too (RFC 9110 §7.6.1).
    std::string_view connection;
    if (auto it = req.find(http::field::connection); it != req.end()) connection = it->value();
    for (const auto& f : req) {
      switch (f.name()) {  // Beast knows the common names: no string work for them
        case http::field::connection:
        case http::field::keep_alive:
        case http::field::proxy_connection:
        case http::field::transfer_encoding:
        case http::field::te:
        case http::field::upgrade:
        case http::field::trailer:
        case http::field::content_length:
        case http::field::expect:
        case http::field::http2_settings:
          continue;
        default:
          break;
      }
      std::string_view name = f.name_string();
      if (!connection.empty() && listsToken(connection, name)) continue;
      ex.head.headers.add(name, f.value());
    }
    ex.head.protocol = Protocol::kHttp1;
    ex.head.tls = config_->tls;
    ex.head.peer = peer_;
    keepAlive_ = req.keep_alive() && !draining_;
    isHead_ = req.method() == http::verb::head;
    ex.body = std::move(req.body());
    ex.response = this;
    parser_.reset();
    started_ = finished_ = chunked_ = false;
    handlerRunning_ = true;
    // A signal per exchange, kept alive by the spawn's completion: the
    // coroutine's cancellation state lives in it until the spawn completes,
    // which is after a pipelined next request may have replaced cancel_.
    cancel_ = std::make_shared<asio::cancellation_signal>();
    asio::co_spawn(
        stream_.get_executor(), this->shared_from_this()->runHandler(),
        asio::bind_cancellation_slot(cancel_->slot(), [sig = cancel_](std::exception_ptr) {}));
  }

  Task<void> runHandler() {
    auto self = this->shared_from_this();
    registration_.exchangeStarted();
    try {
      co_await handler_(*exchange_);
    } catch (const std::exception&) {
      // Cancellation after the client left, or a bug: answered below.
    }
    registration_.exchangeEnded();
    co_await completeResponse();
    exchange_.reset();
    handlerRunning_ = false;
    if (!closing_) setDeadline(SteadyClock::now() + config_->idleTimeout);
    notifyHandlerDone();
    // The reader may be parked in a read while a complete pipelined request is
    // already buffered: parse it from here.
    if (!closing_ && buffer_.size() > 0 && !gone_) {
      co_await parseBuffered();
    }
    if (closing_ && !gone_ && !lingering_) co_await beginClose();
  }

  // Whatever the handler left undone, the connection must end in a valid state.
  Task<void> completeResponse() {
    if (gone_) {
      closing_ = true;
      co_return;
    }
    if (!started_) {
      ResponseHead head;
      head.status = 500;
      head.headers.add("content-type", "application/json");
      head.headers.add("x-request-id", requestIdFrom(exchange_->head.headers.get("x-request-id")));
      std::string body = openAiErrorJson("the gateway failed to produce a response", "server_error",
                                         "internal_error");
      co_await respond(std::move(head), std::move(body));
    } else if (!finished_) {
      abort();  // a truncated body must not look complete
    }
    if (!keepAlive_ || draining_) closing_ = true;
  }

  Task<void> waitHandlerDone() {
    asio::steady_timer waiter(stream_.get_executor(), SteadyClock::time_point::max());
    doneWaiter_ = &waiter;
    co_await waiter.async_wait(kTuple);
    doneWaiter_ = nullptr;
  }

  void notifyHandlerDone() {
    if (doneWaiter_) doneWaiter_->cancel();
  }

  // Half-close our side and keep draining until the client closes or the
  // linger timeout passes.
  Task<void> beginClose() {
    lingering_ = true;
    // On TLS this skips close_notify: the response framing already told the
    // client where the body ends.
    boost::system::error_code ec;
    lowestLayer(stream_).shutdown(tcp::socket::shutdown_send, ec);
    setDeadline(SteadyClock::now() + kLingerTimeout);
    co_return;
  }

  void closeNow() {
    closed_ = true;
    boost::system::error_code ec;
    lowestLayer(stream_).close(ec);
    timer_.cancel();
  }

  // Timeouts ---------------------------------------------------------------

  void setDeadline(SteadyClock::time_point when) {
    deadline_ = when;
    if (when < timer_.expiry()) timer_.expires_at(when);  // wakes the watchdog
  }

  Task<void> watchdog() {
    auto self = this->shared_from_this();
    timer_.expires_at(deadline_);
    while (!closed_) {
      co_await timer_.async_wait(kTuple);
      if (closed_) break;
      auto now = SteadyClock::now();
      if (handlerRunning_) {  // a long stream is not idle, but a stuck write is
        if (writesPending_ > 0 && now >= writeDeadline_) {
          abort();  // the caller has not taken a byte for idle_timeout_ms
          continue;
        }
        timer_.expires_at(
            now + (writesPending_ > 0
                       ? std::min<SteadyClock::duration>(config_->idleTimeout, writeDeadline_ - now)
                       : config_->idleTimeout));
        continue;
      }
      if (now < deadline_) {
        timer_.expires_at(deadline_);
        continue;
      }
      // Deadline passed: idle keep-alive, a slow request head, or lingering.
      closeNow();
      break;
    }
  }

  Stream stream_;
  std::shared_ptr<const SessionConfig> config_;
  Handler handler_;
  asio::steady_timer timer_;
  Registration registration_;
  boost::beast::flat_buffer buffer_;
  std::array<char, kReadChunk> tlsScratch_;  // TLS reads land here first (see readSome)
  std::optional<Parser> parser_;
  std::optional<Exchange> exchange_;
  std::shared_ptr<asio::cancellation_signal> cancel_;
  asio::steady_timer* doneWaiter_ = nullptr;
  SteadyClock::time_point deadline_{};
  std::string peer_;
  bool handlerRunning_ = false;
  bool keepAlive_ = true;
  bool isHead_ = false;
  bool started_ = false;
  bool finished_ = false;
  bool chunked_ = false;
  bool gone_ = false;
  bool closing_ = false;
  bool lingering_ = false;
  bool closed_ = false;
  bool sentContinue_ = false;
  bool parsing_ = false;
  bool draining_ = false;
  int writesPending_ = 0;
  SteadyClock::time_point writeDeadline_{};
};

}  // namespace

void startHttp1(tcp::socket socket, std::string initial, SessionContext context, Handler handler) {
  std::make_shared<H1Session<tcp::socket>>(std::move(socket), std::move(initial),
                                           std::move(context), std::move(handler))
      ->start();
}

void startHttp1(TlsStream stream, SessionContext context, Handler handler) {
  std::make_shared<H1Session<TlsStream>>(std::move(stream), std::string(), std::move(context),
                                         std::move(handler))
      ->start();
}

}  // namespace relay::net
