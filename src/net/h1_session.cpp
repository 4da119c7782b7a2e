// HTTP/1.1 server session: bytes <-> Exchange.
//
// Two coroutines per connection, each with one job:
//
//  - `reader()` owns the socket's read side for the connection's whole life.
//    It appends what arrives to `inbox_` (at most `readAhead_` bytes ahead of
//    the parser) and wakes whoever waits for input. Because it keeps reading
//    while a handler runs, a caller that disconnects is seen at once, even
//    while the upstream is silent, and becomes a terminal cancellation of the
//    handler; the bytes of a pipelined next request wait in `inbox_`.
//  - `serve()` is the request loop, in the shape of Beast's examples: read a
//    head, run the handler, answer, repeat. The handler reads the body only
//    if it wants it (BodySource::readAll): a caller is authenticated on the
//    head, and a request it refuses is answered without reading its body
//    (the connection then closes, since the unread body is in the way).
//
// Bounds (docs/configuration.md): the head is at most max_header_bytes (431)
// and must arrive within header_timeout_ms of its first byte (408); the body
// at most max_request_bytes (413) within body_timeout_ms of the head (408);
// between requests a connection may idle for idle_timeout_ms; a write the
// caller does not take within idle_timeout_ms resets the connection.
// Framing errors (Content-Length with Transfer-Encoding, two different
// Content-Lengths, a space before a colon, a bad chunk size, obs-fold,
// Transfer-Encoding in HTTP/1.0, a Connection field naming more than 16
// fields) are answered 400 and the connection is closed (net/http1_parser.hpp
// has the rules). Responses are serialised here — a status line, the
// handler's fields and our framing — and written by H1Writer (h1_writer.hpp).
#include <array>
#include <charconv>
#include <optional>
#include <span>
#include <type_traits>
#include <variant>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/error.hpp>

#include "h1_request_parser.hpp"
#include "h1_writer.hpp"
#include "input_park.hpp"
#include "relay/common/coarse_clock.hpp"
#include "relay/common/head_writer.hpp"
#include "relay/common/limits.hpp"
#include "relay/common/thread_scratch.hpp"
#include "relay/net/edge_read.hpp"
#include "session_common.hpp"

namespace relay::net {
namespace {

namespace http = boost::beast::http;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// The thread's buffer for answer heads (relay/common/thread_scratch.hpp).
struct AnswerHeads;
constexpr std::size_t kReadChunk = kReadBlockBytes;  // relay/net/read_buffer.hpp
// Bytes read ahead of the parser (a pipelined request, the start of a body):
// enough for a whole head on top of one read.
constexpr std::size_t kReadAheadFloor = 64 * 1024;
// After we decide to close, how long we keep draining the client's bytes so
// that our last response is not destroyed by a reset ("lingering close").
constexpr std::chrono::milliseconds kLingerTimeout{2'000};

template <class Stream>
class H1Session final : public ResponseSink,
                        public BodySource,
                        public Drainable,
                        public std::enable_shared_from_this<H1Session<Stream>> {
 public:
  H1Session(Stream stream, std::string initial, SessionContext context, Handler handler)
      : stream_(std::move(stream)),
        config_(std::move(context.config)),
        slot_(std::move(context.slot)),
        handler_(std::move(handler)),
        input_(stream_.get_executor()),
        roomWake_(stream_.get_executor()),
        watchdogTimer_(stream_.get_executor()),
        writer_(stream_, config_->idleTimeout),
        registration_(context.registry, this),
        acceptedAt_(context.acceptedAt),
        readAhead_(std::max<std::size_t>(kReadAheadFloor, config_->maxHeaderBytes + kReadChunk)) {
    if (!initial.empty()) {
      auto dest = inbox_.prepare(initial.size());
      std::memcpy(dest.data(), initial.data(), initial.size());
      inbox_.commit(initial.size());
    }
    peer_ = peerAddress(lowestLayer(stream_));
    keepAliveHint_ = "keep-alive: timeout=" +
                     std::to_string(std::max<long long>(1, config_->idleTimeout.count() / 1000)) +
                     "\r\n";
  }

  void start() {
    auto self = this->shared_from_this();
    boost::system::error_code ignored;
    lowestLayer(stream_).non_blocking(true, ignored);  // readSome() must never block
    if (registration_.draining()) draining_ = true;
    asio::co_spawn(stream_.get_executor(), self->reader(), asio::detached);
    asio::co_spawn(stream_.get_executor(), self->watchdog(), asio::detached);
    // serve() runs every handler inline: the reader cancels it through this
    // signal when the caller leaves mid-exchange. The completion keeps the
    // signal alive until the coroutine's cancellation state is gone.
    asio::co_spawn(
        stream_.get_executor(), self->serve(),
        asio::bind_cancellation_slot(cancel_->slot(), [sig = cancel_](std::exception_ptr) {}));
  }

  // ResponseSink ----------------------------------------------------------

  Task<bool> respond(ResponseHead head, std::string body) override {
    if (!answerNow(head, body)) co_return false;
    // answerNow() kept what the socket did not take, just now.
    if (writer_.hasKept()) co_return co_await writer_.writeKept({}, Writer::Room::kFullThisTurn);
    co_return true;
  }

  // On plaintext the answer is written at once (answerNow()) and what the
  // socket does not take is kept: serve() writes it when the handler has
  // returned. TLS: nullopt, nothing begun (a TLS write is never complete at
  // once; the caller awaits respond()).
  std::optional<bool> respondNow(ResponseHead& head, std::string& body) override {
    if constexpr (!std::is_same_v<Stream, tcp::socket>) {
      return std::nullopt;
    } else {
      return answerNow(head, body);
    }
  }

  // The head is made in the thread's buffer and, nearly always, written at
  // once with the body; the writer keeps what the socket does not take.
  bool answerNow(ResponseHead& head, std::string& body) {
    if (gone() || started_) return false;
    started_ = true;
    finished_ = true;
    std::string& scratch = threadScratch<AnswerHeads>();
    serializeHead(head, body.size(), false, scratch);
    return writer_.answerNow(scratch, body, isHead_);
  }

  Task<bool> start(ResponseHead head) override {
    if (gone() || started_) co_return false;
    started_ = true;
    chunked_ = !isHead_ && head.status >= 200 && head.status != 204 && head.status != 304;
    std::string h;
    serializeHead(head, 0, true, h);
    if (head.withFirstBytes && chunked_) {
      writer_.holdHead(std::move(h));  // leaves with the first body bytes
      co_return true;
    }
    std::array<asio::const_buffer, 1> bufs{asio::buffer(h)};
    co_return co_await writer_.writeAll(bufs);
  }

  // A chunk the socket takes at once (nearly every SSE write to a caller
  // that keeps up) is written without a coroutine. When it takes part of
  // it, the writer keeps where it stopped (not a copy) and the answer is
  // nullopt: the caller co_awaits write() with the same bytes at once, and
  // write() sends their rest — so it goes out as soon as the caller makes
  // room, under the write-stall watchdog, before the caller reads on.
  std::optional<bool> writeNow(std::string_view bytes) override {
    if (gone() || !started_ || finished_) return false;
    if (bytes.empty() || !chunked_) return true;
    return writer_.chunkNow(bytes);
  }

  Task<bool> write(std::string_view bytes) override {
    // The rest of these same bytes, which writeNow() began (the writer kept
    // where it stopped, not a copy).
    // (A kept answer here is a handler's error: written, but not as this turn's.)
    if (writer_.hasKept())
      co_return co_await writer_.writeKept(
          bytes, writer_.keptIsChunk() ? Writer::Room::kFullThisTurn : Writer::Room::kTryFirst);
    if (gone() || !started_ || finished_) co_return false;
    if (bytes.empty() || !chunked_) co_return true;
    co_return co_await writer_.chunk(bytes, false);
  }

  Task<bool> finish() override { return finishWith({}); }

  Task<bool> finishWith(std::string_view last) override {
    if (gone() || !started_ || finished_) co_return false;
    finished_ = true;
    if (!chunked_) co_return true;
    co_return co_await writer_.chunk(last, true);
  }

  void abort() override {
    writer_.markGone();
    keepAlive_ = false;
    resetConnection(lowestLayer(stream_));
    closed_ = true;
    wakeAll();
  }

  bool started() const override { return started_; }
  // A write failed, or we aborted (the writer's state).
  bool gone() const { return writer_.gone(); }
  bool clientGone() const override { return gone() || peerGone_; }

  // BodySource ------------------------------------------------------------

  Task<BodyResult> readAll(std::string& out) override {
    if (!parser_ || bodyRead_) co_return BodyResult{BodyStatus::kGone, {}};
    bodyRead_ = true;
    if (!parser_->done() && expectsContinue_ && inbox_.size() == 0 && !started_) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      std::array<asio::const_buffer, 1> bufs{asio::buffer(kContinue.data(), kContinue.size())};
      if (!co_await writer_.writeAll(bufs)) co_return BodyResult{BodyStatus::kGone, {}};
    }
    const auto deadline = headDoneAt_ + config_->bodyTimeout;
    for (;;) {
      if (std::optional<BodyResult> r = parseBufferedBody()) {
        if (r->ok()) takeBody(out);
        co_return std::move(*r);
      }
      if (peerGone_ || gone()) co_return BodyResult{BodyStatus::kGone, {}};
      if (!co_await waitInput(deadline)) {
        countLimit(Limit::kBodyTimeout);
        co_return BodyResult{BodyStatus::kTimeout,
                             "the request body did not arrive within " +
                                 std::to_string(config_->bodyTimeout.count()) +
                                 " ms of its head (server.body_timeout_ms)"};
      }
    }
  }

  // The body that came with the head (most requests) is taken without a
  // coroutine of its own. A caller waiting for 100 Continue goes through
  // readAll(), which decides on sending it.
  std::optional<BodyResult> readAllNow(std::string& out) override {
    if (!parser_ || bodyRead_) return BodyResult{BodyStatus::kGone, {}};
    if (expectsContinue_) return std::nullopt;
    std::optional<BodyResult> r = parseBufferedBody();
    if (!r) return std::nullopt;
    bodyRead_ = true;
    if (r->ok()) takeBody(out);
    return r;
  }

  // Drainable: the response in progress says `connection: close`; a
  // connection between requests is closed now.
  void drain() override {
    draining_ = true;
    // Not on this stack: whoever drains may be walking a list of sessions.
    if (input_.parked()) input_.resumeLater(true);
  }

 private:
  // Feeds what the inbox holds to the body parser: the result once the body
  // is complete or wrong, nullopt while more must arrive.
  std::optional<BodyResult> parseBufferedBody() {
    while (!parser_->done() && inbox_.size() > 0) {
      boost::system::error_code ec;
      const std::size_t used = parser_->put(bufferView(inbox_), ec);
      inbox_.consume(used);
      wakeReader();
      if (ec == http::error::body_limit) return bodyTooLarge();
      if (ec && ec != http::error::need_more) {
        return BodyResult{BodyStatus::kMalformed,
                          "malformed HTTP/1.1 request body: " + ec.message()};
      }
      if (ec || used == 0) break;
    }
    if (parser_->done()) return BodyResult{};
    return std::nullopt;
  }

  void takeBody(std::string& out) {
    bodyComplete_ = true;
    std::string& body = parser_->body;
    if (out.empty()) {
      out = std::move(body);
    } else {
      out.append(body);
    }
  }

  // The request loop ------------------------------------------------------

  // serve() is the one coroutine of a request's way through the session:
  // the head is read by the steps below (headStep(), then a park until the
  // reader brings more), and the exchange runs in the same frame. Only what
  // is rare — refusing a head, a handler that left its answer undone — has
  // a coroutine of its own. (A coroutine per step cost a frame, its ramp,
  // body and destroyer, and their instruction-cache lines, on every request:
  // docs/benchmarks.md.)
  Task<void> serve() {
    auto self = this->shared_from_this();
    bool first = true;
    while (!closed_) {
      // The next head. Before its first byte the connection may idle
      // (idle_timeout_ms; header_timeout_ms from accept for the first
      // request); from its first byte the whole head must arrive within
      // header_timeout_ms.
      beginHead();
      HeadWait wait;
      if (inbox_.size() > 0 && first) wait.start = acceptedAt_;
      HeadStep step = headStep(first, wait);
      while (step == HeadStep::kWait) {
        bool arrived = false;
        if (armInputWait(wait.deadline, wait.now)) arrived = co_await input_.park();
        step = arrived ? headStep(first, wait) : HeadStep::kTimedOut;
      }
      if (step != HeadStep::kReady) {
        if (step != HeadStep::kClosed) co_await refuseHead(step, wait, first);
        break;
      }
      first = false;

      // The exchange.
      Exchange ex;
      buildHead(ex.head);
      keepAlive_ = parser_->keepAlive() && !draining_;
      isHead_ = parser_->isHead;
      expectsContinue_ = equalsIgnoreCase(parser_->expect, "100-continue");
      bodyRead_ = false;
      bodyComplete_ = parser_->done();  // no body at all
      ex.bodySource = bodyComplete_ ? nullptr : this;
      ex.response = this;
      started_ = finished_ = chunked_ = false;
      exchangeActive_ = true;
      std::optional<OpenExchange> open(std::in_place, registration_.registry());
      handlerRunning_ = true;
      try {
        co_await handler_(ex);
      } catch (const std::exception&) {
        // Cancellation after the client left, or a bug: answered below.
      }
      handlerRunning_ = false;
      // A handler cancelled because the client left leaves this coroutine's
      // cancellation state set, and Asio then throws from every later
      // co_await: serve() would die here and never close the connection (nor
      // free the session, which the watchdog keeps alive). The cancellation
      // was for the handler only.
      co_await asio::this_coro::reset_cancellation_state();
      // An answer respondNow() began is written whole, also to a caller
      // that has half-closed its side (peerGone_: EOF; a reset fails the
      // write). Bytes kept of a stream the handler left unfinished are not:
      // that connection is reset below, and waiting to write them to a
      // caller that does not read would only delay it.
      if (writer_.hasKept()) {
        if (finished_ && !gone()) {
          // The handler may have waited since respondNow() kept them.
          co_await writer_.writeKept({}, Writer::Room::kTryFirst);
        } else {
          writer_.dropKept();
        }
      }
      if (!responseComplete()) co_await completeResponse(ex);
      open.reset();  // the response is out (or the connection is gone)
      exchangeActive_ = false;
      // An unread (or half-read) body stands between us and the next request.
      if (!bodyComplete_) keepAlive_ = false;
      parser_.reset();
      if (!keepAlive_ || gone() || peerGone_ || draining_) break;
    }
    serveDone_ = true;
    if (peerGone_ || gone()) {
      closeNow();
    } else {
      beginLinger();
    }
  }

  // What the bytes so far make of the next head.
  enum class HeadStep {
    kReady,       // a head is parsed and its framing is acceptable
    kWait,        // more must arrive: park until HeadWait::deadline
    kClosed,      // the connection ends without a request (EOF, drain)
    kTimedOut,    // HeadWait::deadline passed first
    kBadFraming,  // parsed, but framing the session refuses (headFramingOk())
    kBad,         // the parser refused it (HeadWait::ec)
  };
  struct HeadWait {
    std::optional<SteadyClock::time_point> start;  // the head's first byte
    SteadyClock::time_point now;                   // this step's clock reading
    SteadyClock::time_point deadline;              // of the wait, when kWait
    boost::system::error_code ec;                  // the parser's, when kBad
  };

  void beginHead() {
    parser_.emplace();
    parser_->headerLimit(config_->maxHeaderBytes);
    parser_->bodyLimit(config_->maxRequestBytes);
    parser_->eager(false);
  }

  // One pass over what the inbox holds. The cap is on the whole head,
  // however it arrives: the parser takes nothing of a head until it has
  // ended (the inbox can hold a whole head: readAhead_ is above the cap),
  // and a head that has not ended within max_header_bytes is header_limit.
  HeadStep headStep(bool first, HeadWait& w) {
    // One clock reading per pass (none runs between here and the wait):
    // when the head starts, when it is whole, and the deadline of the wait.
    // With no bytes yet (a keep-alive connection between requests) it only
    // sets an idle or header deadline of seconds: the coarse clock does.
    w.now = inbox_.size() > 0 ? SteadyClock::now() : coarseSteadyNow();
    if (inbox_.size() > 0) {
      if (!w.start) w.start = w.now;
      w.ec = {};
      const std::size_t used = parser_->put(bufferView(inbox_), w.ec);
      inbox_.consume(used);
      wakeReader();
      if (parser_->headerDone() && !w.ec) {
        headDoneAt_ = w.now;
        return headFramingOk() ? HeadStep::kReady : HeadStep::kBadFraming;
      }
      if (w.ec && w.ec != http::error::need_more) return HeadStep::kBad;
    }
    if (peerGone_ || gone() || closed_) return HeadStep::kClosed;
    if (draining_ && !w.start) return HeadStep::kClosed;
    w.deadline = w.start ? *w.start + config_->headerTimeout
                 : first ? acceptedAt_ + config_->headerTimeout
                         : w.now + config_->idleTimeout;
    return HeadStep::kWait;
  }

  // Framing rules the parser leaves to the session. A Transfer-Encoding
  // whose last coding is not chunked leaves the body's length unknowable
  // (RFC 9112 §6.1 says 400 and close): whoever else reads this connection
  // could see a different request boundary. Transfer-Encoding in an
  // HTTP/1.0 request is faulty framing (RFC 9112 §6.1): a proxy in front
  // that ignores it sees other request boundaries.
  bool badTransferEncoding() const {
    return parser_->transferEncoding && (!parser_->chunked() || parser_->version() < 11);
  }
  bool headFramingOk() const { return !badTransferEncoding() && !parser_->tooManyConnectionTokens; }

  // A head that will not be served (any step but kReady, kWait and
  // kClosed): answered where there is someone to answer, or counted.
  Task<void> refuseHead(HeadStep step, const HeadWait& w, bool first) {
    switch (step) {
      case HeadStep::kTimedOut:
        if (!w.start) {
          countLimit(first ? Limit::kHeaderTimeout : Limit::kIdleTimeout);
          co_return;  // nothing was asked: nothing to answer
        }
        countLimit(Limit::kHeaderTimeout);
        co_await answerAndClose(408,
                                "the request head did not arrive within " +
                                    std::to_string(config_->headerTimeout.count()) +
                                    " ms (server.header_timeout_ms)",
                                "request_timeout");
        co_return;
      case HeadStep::kBadFraming:
        if (badTransferEncoding()) {
          co_await refuseHead(http::error::bad_transfer_encoding);
        } else {
          co_await answerAndClose(400,
                                  "the Connection field names more than " +
                                      std::to_string(H1RequestParser::kMaxConnectionTokens) +
                                      " fields",
                                  "bad_request");
        }
        co_return;
      case HeadStep::kBad:
        co_await refuseHead(w.ec);
        co_return;
      default:
        co_return;
    }
  }

  Task<void> refuseHead(boost::system::error_code ec) {
    if (ec == http::error::header_limit) {
      countLimit(Limit::kMaxHeaderBytes);
      co_await answerAndClose(431,
                              "request header fields exceed " +
                                  std::to_string(config_->maxHeaderBytes) +
                                  " bytes (server.max_header_bytes)",
                              "headers_too_large");
    } else if (ec == http::error::body_limit) {  // a Content-Length over the cap
      countLimit(Limit::kMaxRequestBytes);
      co_await answerAndClose(413, bodyTooLargeMessage(), "request_too_large");
    } else {
      co_await answerAndClose(400, "malformed HTTP/1.1 request: " + ec.message(), "bad_request");
    }
  }

  // An answer of the session's own (no handler ran); the connection closes.
  Task<void> answerAndClose(int status, std::string message, std::string_view code) {
    keepAlive_ = false;
    started_ = false;
    finished_ = false;
    isHead_ = false;
    std::string_view given;
    if (parser_ && parser_->headerDone()) given = parser_->headers.get("x-request-id");
    ResponseHead head = sessionErrorHead(status, given);
    std::string body = sessionErrorBody(message, code);
    co_await respond(std::move(head), std::move(body));
  }

  void buildHead(RequestHead& head) {
    head.method = std::move(parser_->method);
    std::string_view target = parser_->target;
    std::size_t q = target.find('?');
    if (q == std::string_view::npos) {
      head.path = std::move(parser_->target);
    } else {
      head.path = std::string(target.substr(0, q));
      head.query = std::string(target.substr(q + 1));
    }
    head.headers = std::move(parser_->headers);
    head.protocol = Protocol::kHttp1;
    head.tls = config_->tls;
    head.peer = peer_;
    head.receivedAt = headDoneAt_;
  }

  // Nothing left for completeResponse() to do (the common case: no coroutine for it).
  bool responseComplete() const { return gone() || peerGone_ || finished_; }

  // Whatever the handler left undone, the connection must end in a valid state.
  Task<void> completeResponse(const Exchange& ex) {
    if (gone() || peerGone_) co_return;
    if (!started_) {
      ResponseHead head = sessionErrorHead(500, ex.head.headers.get("x-request-id"));
      std::string body = openAiErrorJson("the gateway failed to produce a response", "server_error",
                                         "internal_error");
      co_await respond(std::move(head), std::move(body));
    } else if (!finished_) {
      abort();  // a truncated body must not look complete
    }
  }

  BodyResult bodyTooLarge() {
    countLimit(Limit::kMaxRequestBytes);
    return BodyResult{BodyStatus::kTooLarge, bodyTooLargeMessage()};
  }

  std::string bodyTooLargeMessage() const {
    return "request body exceeds the limit of " + std::to_string(config_->maxRequestBytes) +
           " bytes (server.max_request_bytes)";
  }

  // The answer's head into `out` (cleared first).
  void serializeHead(const ResponseHead& head, std::size_t contentLength, bool streamed,
                     std::string& out) {
    // The body was not read whole: the next request cannot be found, so this
    // answer is the connection's last.
    if (exchangeActive_ && !bodyComplete_) keepAlive_ = false;
    using namespace std::string_view_literals;
    out.clear();
    // The status line, content-length or transfer-encoding, connection and
    // the blank line fit in 160 bytes (the writer grows if not).
    HeadWriter w(out,
                 160 + head.headers.textBytes() + 4 * head.headers.size() + keepAliveHint_.size());
    char digits[24];
    auto [statusEnd, statusEc] = std::to_chars(digits, digits + sizeof digits, head.status);
    w.raw("HTTP/1.1 "sv).raw(std::string_view(digits, statusEnd - digits)).raw(" "sv);
    w.raw(reasonPhrase(head.status)).raw("\r\n"sv);
    for (const HeaderField& f : head.headers) {
      if (isHopByHopHeader(f.name) || f.name == "content-length") continue;
      w.field(f.name, f.value);
    }
    if (streamed) {
      if (chunked_) w.raw("transfer-encoding: chunked\r\n"sv);
    } else if (head.status >= 200 && head.status != 204 && head.status != 304) {
      auto [end, ec] = std::to_chars(digits, digits + sizeof digits, contentLength);
      w.field("content-length"sv, std::string_view(digits, end - digits));
    }
    if (!keepAlive_ || draining_) {
      w.raw("connection: close\r\n"sv);
    } else {
      // How long we keep an idle connection: clients that honour the hint
      // (undici, Python's httpx) stop reusing it before we close it.
      w.raw(keepAliveHint_);
    }
    w.raw("\r\n"sv);
  }

  // Input -------------------------------------------------------------------

  Task<void> reader() {
    auto self = this->shared_from_this();
    while (!closed_) {
      if (inbox_.size() >= readAhead_ && !lingering_) {
        // The parser is behind (a handler is running): wait for it to take bytes.
        roomWake_.expires_at(SteadyClock::time_point::max());
        roomWaiting_ = true;
        co_await roomWake_.async_wait(kTuple);
        roomWaiting_ = false;
        continue;
      }
      auto [ec, n] = co_await readSome();
      if (ec) break;
      if (lingering_) {
        inbox_.consume(inbox_.size());
        continue;
      }
      // The parser (serve(), or a handler reading the body) runs from here.
      if (n > 0) wakeInputWaiter();
    }
    // The client is gone (or we closed). A running handler learns it now.
    peerGone_ = true;
    if (handlerRunning_ && !finished_) cancel_->emit(asio::cancellation_type::terminal);
    wakeInputWaiter();
    if (serveDone_) closeNow();
  }

  // One read. On plaintext an edge read (relay/net/edge_read.hpp): after a
  // read that drained the socket the next one waits for readiness without
  // trying first, and it costs neither a re-arm of the descriptor nor an
  // EAGAIN — one recv per arrival. Not a coroutine on plaintext: the reader
  // awaits Asio's own operation, with no frame of ours around it.
  auto readSome() {
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      // Nothing buffered: the wait holds no read buffer (a connection whose
      // response streams for minutes keeps a few hundred bytes, not 16 KiB);
      // the read prepares one when bytes are there.
      if (inbox_.size() == 0) inbox_.shrink_to_fit();
      return asyncEdgeRead(stream_, inbox_, kReadChunk, kTuple);
    } else {
      return readSomeTls();
    }
  }
  // Into a buffer of our own: while this read is pending, the parser may
  // consume inbox_, which would move the region a read into inbox_.prepare()
  // was given.
  Task<std::tuple<boost::system::error_code, std::size_t>> readSomeTls() {
    auto [ec, n] = co_await stream_.async_read_some(asio::buffer(tlsScratch_), kTuple);
    if (!ec) {
      auto dest = inbox_.prepare(n);
      std::memcpy(dest.data(), tlsScratch_.data(), n);
      inbox_.commit(n);
    }
    co_return std::tuple{ec, n};
  }

  // Waits until the reader brings something (bytes, EOF) or `deadline`
  // passes. False when the deadline passed. The caller checks its condition
  // before every wait, so a wake-up given while nobody waited is not lost.
  //
  // The reader resumes the waiter directly (InputPark); the watchdog ends
  // the wait at the deadline. Its timer moves only for a deadline earlier
  // than its next wake-up (the first head, a head or body that arrives in
  // pieces): between keep-alive requests the idle deadline is later, and a
  // wait costs no timer operation. (serve() does the same in place, with
  // armInputWait() and the park, for the head.)
  Task<bool> waitInput(SteadyClock::time_point deadline) {
    if (!armInputWait(deadline, SteadyClock::now())) co_return false;
    co_return co_await input_.park();
  }
  // Before `co_await input_.park()`: false when `deadline` has passed (no
  // wait), else the watchdog is set to end the wait at it.
  bool armInputWait(SteadyClock::time_point deadline, SteadyClock::time_point now) {
    if (now >= deadline) return false;
    inputDeadline_ = deadline;
    if (deadline < watchdogTimer_.expiry()) watchdogTimer_.expires_at(deadline);
    return true;
  }

  // From the reader (new bytes, EOF) and the watchdog: both are coroutines
  // of this session that hold it and re-check its state after the call.
  void wakeInputWaiter() {
    if (input_.parked()) input_.resume(true);
  }
  void wakeReader() {
    if (roomWaiting_) roomWake_.cancel();
  }
  // From anywhere (a handler's abort, the watchdog, closing): the waiter
  // runs after the caller returns.
  void wakeAll() {
    if (input_.parked()) input_.resumeLater(true);
    wakeReader();
    watchdogTimer_.cancel();
  }

  // Closing -------------------------------------------------------------------

  // Half-close our side and keep draining until the client closes or the
  // linger timeout passes (so that a reset does not destroy our last answer).
  void beginLinger() {
    if (closed_ || lingering_) return;
    lingering_ = true;
    // On TLS this skips close_notify: the response framing already told the
    // client where the body ends.
    boost::system::error_code ec;
    lowestLayer(stream_).shutdown(tcp::socket::shutdown_send, ec);
    inbox_.consume(inbox_.size());
    lingerDeadline_ = SteadyClock::now() + kLingerTimeout;
    wakeReader();
    if (lingerDeadline_ < watchdogTimer_.expiry()) watchdogTimer_.expires_at(lingerDeadline_);
  }

  void closeNow() {
    if (closed_ && lowestLayer(stream_).is_open() == false) return;
    closed_ = true;
    boost::system::error_code ec;
    lowestLayer(stream_).close(ec);
    wakeAll();
  }

  // Resets a write the caller has not taken within idle_timeout_ms, and
  // closes a lingering connection at the linger deadline.
  Task<void> watchdog() {
    auto self = this->shared_from_this();
    while (!closed_) {
      auto now = SteadyClock::now();
      if (writer_.writing() && now >= writer_.stallDeadline()) {
        countLimit(Limit::kWriteStall);
        abort();
        break;
      }
      if (lingering_ && now >= lingerDeadline_) {
        closeNow();
        break;
      }
      if (input_.parked() && now >= inputDeadline_) {
        input_.resume(false);  // the wait for input timed out; serve() runs from here
        continue;
      }
      auto next = writer_.writing() ? writer_.stallDeadline() : now + config_->idleTimeout;
      if (lingering_) next = std::min(next, lingerDeadline_);
      if (input_.parked()) next = std::min(next, inputDeadline_);
      watchdogTimer_.expires_at(next);
      co_await watchdogTimer_.async_wait(kTuple);
    }
  }

  Stream stream_;
  std::shared_ptr<const SessionConfig> config_;
  std::shared_ptr<void> slot_;
  Handler handler_;
  InputPark input_;                   // a head/body parse waiting for the reader
  asio::steady_timer roomWake_;       // the parser wakes a reader paused at readAhead_
  asio::steady_timer watchdogTimer_;  // write stalls, input deadlines, the linger deadline
  using Writer = H1Writer<Stream>;
  Writer writer_;  // the answer's bytes to the socket
  Registration registration_;
  std::shared_ptr<asio::cancellation_signal> cancel_ =
      std::make_shared<asio::cancellation_signal>();
  ReadBuffer inbox_;
  // TLS reads land here first (see readSome); plaintext sessions have none.
  std::conditional_t<std::is_same_v<Stream, tcp::socket>, std::monostate,
                     std::array<char, kReadChunk>>
      tlsScratch_;
  std::optional<H1RequestParser> parser_;
  std::string peer_;
  std::string keepAliveHint_;
  SteadyClock::time_point acceptedAt_;
  SteadyClock::time_point headDoneAt_{};
  SteadyClock::time_point inputDeadline_{};  // of the parked wait for input
  SteadyClock::time_point lingerDeadline_{};
  const std::size_t readAhead_;
  // Connection state.
  bool keepAlive_ = true;
  bool draining_ = false;
  bool peerGone_ = false;  // the reader saw EOF or an error
  bool lingering_ = false;
  bool closed_ = false;
  bool serveDone_ = false;
  bool roomWaiting_ = false;
  // The exchange in progress.
  bool exchangeActive_ = false;
  bool handlerRunning_ = false;  // only a running handler is cancelled when the client leaves
  bool isHead_ = false;
  bool expectsContinue_ = false;
  bool bodyRead_ = false;      // readAll() was called
  bool bodyComplete_ = false;  // the parser has the whole body (or there was none)
  bool started_ = false;
  bool finished_ = false;
  bool chunked_ = false;
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
