// HTTP/2 server session on nghttp2 (1.52: mem_recv / mem_send, data providers).
//
// Shape (after nghttpx's shrpx_http2_upstream): one reader coroutine feeds
// bytes to nghttp2_session_mem_recv; one writer coroutine drains
// nghttp2_session_mem_send into the socket. nghttp2 callbacks only record what
// happened (a request head arrived, DATA, a stream closed); the session acts
// on it after mem_recv returns — nothing calls into nghttp2 from inside its
// own callbacks.
//
// A handler starts as soon as a request's HEADERS are complete, so the caller
// is authenticated before its body is read; it asks for the body through the
// stream's BodySource. Bounds (docs/configuration.md):
//  - the decoded header list: max_header_bytes, advertised as
//    SETTINGS_MAX_HEADER_LIST_SIZE and counted while HPACK decodes (431;
//    far beyond it the stream is reset without decoding further);
//  - request bodies: automatic WINDOW_UPDATE is off. A stream's window grows
//    only as its handler takes the bytes, and the connection's window is
//    max_connection_body_bytes, given back only when a stream's body leaves
//    memory: whatever its stream count, a connection never holds more body
//    bytes than that;
//  - floods: control frames that carry no request (PING, SETTINGS, PRIORITY,
//    RST_STREAM, empty DATA) draw from a per-connection allowance; a peer
//    that exhausts it gets GOAWAY ENHANCE_YOUR_CALM (the rapid-reset attack,
//    CVE-2023-44487, is one such flood). nghttp2's own limits (outbound ack
//    queue, SETTINGS entries, CONTINUATION frames, reset rate) stay as a
//    backstop;
//  - time: a head must arrive whole within header_timeout_ms, a body within
//    body_timeout_ms of its head, and a connection without streams closes
//    after idle_timeout_ms.
// Response bodies go through a per-stream buffer behind a deferred data
// provider: the handler's write() appends and resumes the provider, and waits
// while the buffer is above its high-water mark — which is where a client's
// flow-control window becomes backpressure on the upstream read.
#include <map>
#include <optional>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <nghttp2/nghttp2.h>

#include "h2_stream.hpp"
#include "relay/common/limits.hpp"
#include "relay/net/edge_read.hpp"
#include "session_common.hpp"

namespace relay::net {
namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kReadChunk = kReadBlockBytes;  // relay/net/read_buffer.hpp
constexpr std::size_t kWriteBatch = 64 * 1024;
constexpr std::int32_t kMaxWindow = 2147483647;  // RFC 9113 §6.9.1
constexpr std::uint64_t kDefaultMaxFrame =
    16384;  // SETTINGS_MAX_FRAME_SIZE we leave at its default
// Frames that carry no request, allowed per connection: a burst, then this
// many per second. An honest client sends a handful (SETTINGS and its ack, a
// PING now and then, a RST_STREAM per cancelled request).
constexpr double kControlBurst = 512;
constexpr double kControlPerSecond = 64;
// Past this many times max_header_bytes the stream is reset rather than
// decoded to the end (the HPACK state still is).
constexpr std::uint64_t kHeaderResetFactor = 4;

template <class Stream>
class H2Session final : public H2Connection,
                        public Drainable,
                        public std::enable_shared_from_this<H2Session<Stream>> {
 public:
  H2Session(Stream stream, std::string initial, SessionContext context, Handler handler)
      : stream_(std::move(stream)),
        initial_(std::move(initial)),
        config_(std::move(context.config)),
        slot_(std::move(context.slot)),
        handler_(std::move(handler)),
        writerWake_(stream_.get_executor()),
        idleTimer_(stream_.get_executor()),
        registration_(context.registry, this) {
    peer_ = peerAddress(lowestLayer(stream_));
    connectionWindow_ = static_cast<std::int32_t>(
        std::min<std::uint64_t>(config_->maxConnectionBodyBytes, kMaxWindow));
    windowStep_ = std::max<std::uint64_t>(1, connectionWindow_ / 16);
  }

  ~H2Session() override {
    if (session_) nghttp2_session_del(session_);
  }

  void start() {
    if (!initSession()) {
      closeNow();
      return;
    }
    auto self = this->shared_from_this();
    asio::co_spawn(stream_.get_executor(), self->readLoop(), asio::detached);
    asio::co_spawn(stream_.get_executor(), self->writeLoop(), asio::detached);
    asio::co_spawn(stream_.get_executor(), self->idleWatch(), asio::detached);
    if (registration_.draining()) drain();
  }

  // Drainable: GOAWAY with the last stream we took; streams already open
  // finish, and the connection closes once none is left.
  void drain() override {
    if (draining_ || closed_) return;
    draining_ = true;
    nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                          nullptr, 0);
    wakeWriter();
  }

  // H2Connection: what a stream asks of its connection ----------------------

  nghttp2_session* session() override { return session_; }
  void wakeWriter() override {
    writeRequested_ = true;
    writerWake_.cancel();
  }
  asio::any_io_executor executor() override { return stream_.get_executor(); }
  std::chrono::milliseconds flushTimeout() const override { return config_->idleTimeout; }
  std::uint64_t maxRequestBytes() const override { return config_->maxRequestBytes; }
  std::uint64_t maxConnectionBodyBytes() const override { return config_->maxConnectionBodyBytes; }
  std::chrono::milliseconds bodyTimeout() const override { return config_->bodyTimeout; }

  void bodyWanted(std::int32_t id) override {
    H2Stream* st = find(id);
    if (!st || st->closed) return;
    if (st->unconsumed > 0) {
      nghttp2_session_consume_stream(session_, id, st->unconsumed);
      st->unconsumed = 0;
      wakeWriter();
    }
  }

 private:
  using Streams = std::map<std::int32_t, std::unique_ptr<H2Stream>>;

  bool initSession() {
    nghttp2_session_callbacks* cb = nullptr;
    if (nghttp2_session_callbacks_new(&cb) != 0) return false;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &H2Session::onBeginHeaders);
    nghttp2_session_callbacks_set_on_header_callback(cb, &H2Session::onHeader);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &H2Session::onFrameRecv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &H2Session::onDataChunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, &H2Session::onStreamClose);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, &H2Session::onFrameSend);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, &H2Session::onInvalidFrame);
    nghttp2_option* opt = nullptr;
    if (nghttp2_option_new(&opt) != 0) {
      nghttp2_session_callbacks_del(cb);
      return false;
    }
    // Windows grow as bodies are consumed (see the top of this file).
    nghttp2_option_set_no_auto_window_update(opt, 1);
    // Backstops behind our own flood allowance: a reset rate well above it,
    // and nghttp2's defaults for the rest, stated so they are not left to chance.
    nghttp2_option_set_stream_reset_rate_limit(opt, 4096, 256);
    nghttp2_option_set_max_continuations(opt, 8);
    nghttp2_option_set_max_outbound_ack(opt, 1000);
    nghttp2_option_set_max_settings(opt, 32);
    int rv = nghttp2_session_server_new2(&session_, cb, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    if (rv != 0) return false;
    const auto& h2 = config_->http2;
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, h2.maxConcurrentStreams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, h2.initialWindowBytes},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, config_->maxHeaderBytes},
    };
    if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0)
      return false;
    // The connection's window is the memory it may hold in request bodies.
    if (nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, connectionWindow_) !=
        0)
      return false;
    controlAllowance_ = kControlBurst;
    controlRefilledAt_ = SteadyClock::now();
    return true;
  }

  // nghttp2 callbacks: record only --------------------------------------------

  static H2Session& self(void* user) { return *static_cast<H2Session*>(user); }

  static int onBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    H2Session& s = self(user);
    auto stream = std::make_unique<H2Stream>(s, frame->hd.stream_id);
    stream->exchange.head.protocol = Protocol::kHttp2;
    stream->exchange.head.tls = s.config_->tls;
    stream->exchange.head.peer = s.peer_;
    s.streams_[frame->hd.stream_id] = std::move(stream);
    return 0;
  }

  static int onHeader(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                      std::size_t namelen, const std::uint8_t* value, std::size_t valuelen,
                      std::uint8_t, void* user) {
    H2Session& s = self(user);
    H2Stream* st = s.find(frame->hd.stream_id);
    if (!st) return 0;
    if (st->headDone) {
      // Trailers (a HEADERS frame after the head) are not part of the
      // request the pipeline sees: they are dropped. HPACK still decodes
      // (and nghttp2 validates) each field: past max_header_bytes the stream
      // is reset, and the rest of the block decodes without either, so that
      // references to one large table entry cannot cost a decode each.
      st->headerBytes += namelen + valuelen + 32;  // counted from 0 after the head
      if (st->headerBytes <= s.config_->maxHeaderBytes) return 0;
      countLimit(Limit::kMaxHeaderBytes);
      s.resetProvoked(*st);
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    // RFC 7541 §4.1 sizes, as SETTINGS_MAX_HEADER_LIST_SIZE counts them.
    st->headerBytes += namelen + valuelen + 32;
    if (st->headerBytes > s.config_->maxHeaderBytes) {
      st->headersTooLarge = true;
      if (st->headerBytes > kHeaderResetFactor * s.config_->maxHeaderBytes) {
        // No frame-received callback follows for this HEADERS: count it here.
        countLimit(Limit::kMaxHeaderBytes);
        s.resetProvoked(*st);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // RST_STREAM; HPACK decoding goes on
      }
      return 0;  // counted, never stored
    }
    std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    RequestHead& head = st->exchange.head;
    if (n == ":method") {
      head.method = std::string(v);
    } else if (n == ":path") {
      std::size_t q = v.find('?');
      head.path = std::string(v.substr(0, q));
      if (q != std::string_view::npos) head.query = std::string(v.substr(q + 1));
    } else if (n == ":authority") {
      head.headers.add("host", v);  // the HTTP/1.1 name, so handlers see one field
    } else if (!n.empty() && n[0] == ':') {
      // :scheme and friends describe the hop.
    } else if (n == "content-length") {
      std::uint64_t len = 0;
      for (char c : v)
        len = len * 10 + static_cast<unsigned>(c - '0');  // nghttp2 validated it
      st->declaredLength = len;
      st->hasDeclaredLength = true;
    } else if (!isHopByHopHeader(n)) {
      head.headers.add(n, v);
    }
    return 0;
  }

  static int onDataChunk(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                         std::size_t len, void* user) {
    H2Session& s = self(user);
    H2Stream* st = s.find(id);
    if (!st) {
      s.consumeLater(id, len);
      return 0;
    }
    s.dataSinceTick_ = true;
    bool wasTooLarge = st->tooLarge();
    if (st->takeData(data, len)) {
      st->held += len;
      s.connHeld_ += len;
      // The connection's body budget is used up (less than one DATA frame of
      // room): uploads wait for room.
      if (s.connHeld_ + kDefaultMaxFrame > s.config_->maxConnectionBodyBytes &&
          !s.bodyBudgetFull_) {
        s.bodyBudgetFull_ = true;
        countLimit(Limit::kMaxConnectionBodyBytes);
      }
      if (st->wantsBody) {
        s.consumeLater(id, len);
      } else {
        st->unconsumed += len;
      }
    } else {
      s.consumeLater(id, len);  // dropped at once: its window is free again
      if (st->tooLarge() && !wasTooLarge) s.release(*st);
    }
    return 0;
  }

  static int onFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    H2Session& s = self(user);
    switch (frame->hd.type) {
      case NGHTTP2_PING:
      case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK)) s.controlFrame();
        break;
      case NGHTTP2_PRIORITY:
      case NGHTTP2_RST_STREAM:
        s.controlFrame();
        break;
      case NGHTTP2_DATA:
        // No data, padding or not (padlen counts the padding and its length byte).
        if (frame->hd.length == frame->data.padlen && !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
          s.controlFrame();
        break;
      default:
        break;
    }
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    H2Stream* st = s.find(frame->hd.stream_id);
    if (!st) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && !st->headDone) {
      st->headDone = true;
      st->headerBytes = 0;  // from here it counts the trailers
      st->headAt = SteadyClock::now();
      s.events_.push_back(st->id);  // launch (or reject) after mem_recv
    }
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) st->requestEnded();
    return 0;
  }

  static int onStreamClose(nghttp2_session*, std::int32_t id, std::uint32_t errorCode, void* user) {
    H2Session& s = self(user);
    auto it = s.streams_.find(id);
    if (it == s.streams_.end()) return 0;
    H2Stream& st = *it->second;
    st.peerClosed(errorCode);  // wakes a waiting write or body read; cancels a running handler
    if (!st.handlerRunning) s.erase(it);  // nghttp2 no longer refers to it
    return 0;
  }

  // Resets the client provokes draw from the allowance as the ones it sends
  // do ("MadeYouReset", CVE-2025-8671: HEADERS followed by a WINDOW_UPDATE
  // that overflows the stream's window, or by DATA past its content-length,
  // started a handler per pair, unlimited, and a peer that never acks our
  // SETTINGS could queue refused streams' resets without bound):
  //  - when nghttp2 refuses a frame as a stream error and says so (a
  //    WINDOW_UPDATE overflow, a malformed field, a stream refused before our
  //    SETTINGS are acked), at once: the reset may wait behind a full socket;
  //  - when a reset nghttp2 decided on its own without saying so (DATA past
  //    content-length or over the stream's window, END_STREAM short of it)
  //    is sent (onFrameSend);
  //  - when a callback of ours refuses a head or trailers (resetProvoked()).
  // A stream refused before its launch is never launched. (A stream nghttp2
  // refuses outright keeps no object: it is charged once, here.)
  static int onInvalidFrame(nghttp2_session*, const nghttp2_frame* frame, int, void* user) {
    H2Session& s = self(user);
    if (H2Stream* st = s.find(frame->hd.stream_id)) {
      s.resetProvoked(*st);
    } else {
      s.controlFrame();
    }
    return 0;
  }

  void resetProvoked(H2Stream& st) {
    if (!st.resetCharged) controlFrame();
    st.resetCharged = true;
    if (!st.handlerRunning) st.answered = true;
  }

  static int onFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
      // Ours carry NO_ERROR (stopUploads), CANCEL and INTERNAL_ERROR
      // (H2Stream::abort); any other code is nghttp2's answer to the client.
      const std::uint32_t code = frame->rst_stream.error_code;
      // (REFUSED_STREAM always went through onInvalidFrame, with no stream
      // to mark: it was charged there.)
      if (code != NGHTTP2_NO_ERROR && code != NGHTTP2_CANCEL && code != NGHTTP2_INTERNAL_ERROR &&
          code != NGHTTP2_REFUSED_STREAM) {
        H2Session& s = self(user);
        H2Stream* st = s.find(frame->hd.stream_id);
        if (!st || !st->resetCharged) s.controlFrame();
        if (st) st->resetCharged = true;
      }
      return 0;
    }
    // Our answer ended while the client may still be uploading: stop the
    // upload (RFC 9113 §8.1) — after mem_send, never from here.
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      H2Session& s = self(user);
      H2Stream* st = s.find(frame->hd.stream_id);
      if (st && !st->requestComplete) s.stopUploads_.push_back(st->id);
    }
    return 0;
  }

  H2Stream* find(std::int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second.get();
  }

  // Flow control ------------------------------------------------------------

  // A stream's window for bytes taken or dropped; the connection's comes
  // back in payOwedWindow(), for every byte not held.
  void consumeLater(std::int32_t id, std::size_t streamBytes) {
    consumes_.push_back({id, streamBytes});
  }

  // A stream's body leaves memory: its share of the connection window may
  // come back.
  void release(H2Stream& st) {
    connHeld_ -= st.held;
    st.held = 0;
    st.unconsumed = 0;
  }

  // Also called from onStreamClose: the window is given back later
  // (payOwedWindow), outside nghttp2's callbacks.
  void erase(typename Streams::iterator it) {
    release(*it->second);
    streams_.erase(it);
    wakeWriter();
  }

  // Gives back the connection window of every byte received and not held:
  // dropped at once, or held and released since, and what nghttp2 consumed
  // itself (padding, DATA for closed streams). The client may always send
  // the budget less what is held, less at most one step. (Consuming through
  // nghttp2 would send a WINDOW_UPDATE only once half the window is
  // consumed: a body held for a long answer could keep the rest under half,
  // and another upload would wait for room the budget has.) The update is
  // never more than nghttp2 counts as received: the window never grows past
  // the budget.
  void payOwedWindow() {
    if (connHeld_ + kDefaultMaxFrame <= config_->maxConnectionBodyBytes) bodyBudgetFull_ = false;
    if (closed_) return;
    const std::int32_t received = nghttp2_session_get_effective_recv_data_length(session_);
    if (received <= 0 || static_cast<std::uint64_t>(received) <= connHeld_) return;
    const std::uint64_t free = static_cast<std::uint64_t>(received) - connHeld_;
    // Less than a step is given back too when the client has less than a
    // step left to send: else a body still arriving could wait for it.
    const std::uint64_t left =
        connectionWindow_ > received ? static_cast<std::uint64_t>(connectionWindow_ - received) : 0;
    if (free < windowStep_ && left >= windowStep_) return;
    if (nghttp2_submit_window_update(session_, NGHTTP2_FLAG_NONE, 0,
                                     static_cast<std::int32_t>(free)) == 0)
      wakeWriter();
  }

  void applyConsumes() {
    for (const Consume& c : consumes_) {
      if (c.stream > 0) nghttp2_session_consume_stream(session_, c.id, c.stream);
    }
    consumes_.clear();
    payOwedWindow();
  }

  // A frame that carries no request draws from the allowance.
  void controlFrame() {
    auto now = SteadyClock::now();
    double elapsed = std::chrono::duration<double>(now - controlRefilledAt_).count();
    controlRefilledAt_ = now;
    controlAllowance_ = std::min(kControlBurst, controlAllowance_ + elapsed * kControlPerSecond);
    controlAllowance_ -= 1;
    if (controlAllowance_ < 0) flooded_ = true;
  }

  // After mem_recv: act on what the callbacks recorded ------------------------

  // Uploads that fill the budget together, none of them whole, would wait
  // for each other until body_timeout_ms: nothing they hold would ever
  // leave memory. The youngest is refused (503) and lets its bytes go, so
  // that the others can finish. Not a deadlock, and left alone: a whole
  // body (it leaves when answered), a stream that closed (its bytes leave
  // when its handler ends), one whose content-length says it can still
  // arrive whole in what the client may send, and, after a read, one
  // without a content-length (it may end at any frame, END_STREAM needs no
  // window): that is decided on a tick without DATA (`quiet`). One upload
  // alone always fits: the budget is at least max_request_bytes.
  void breakUploadDeadlock(bool quiet) {
    if (!bodyBudgetFull_ || closed_) return;
    // What the client may still send on the connection.
    const std::int32_t received = nghttp2_session_get_effective_recv_data_length(session_);
    const std::uint64_t left = received >= 0 && connectionWindow_ > received
                                   ? static_cast<std::uint64_t>(connectionWindow_ - received)
                                   : 0;
    H2Stream* youngest = nullptr;
    int waiting = 0;
    for (auto& [id, st] : streams_) {  // by id: the last is the youngest
      if (st->held == 0 || st->rejected) continue;
      if (st->requestComplete || st->closed) return;
      if (st->hasDeclaredLength) {
        if (st->held <= st->declaredLength && st->declaredLength - st->held <= left) return;
      } else if (!quiet) {
        return;
      }
      ++waiting;
      youngest = st.get();
    }
    if (waiting < 2) return;
    youngest->refuseForRoom();
    release(*youngest);
    payOwedWindow();
  }

  void processEvents() {
    applyConsumes();
    std::vector<std::int32_t> events;
    events.swap(events_);
    // A flood ends the connection: nothing of the read that carried it runs.
    if (flooded_) return;
    for (std::int32_t id : events) {
      H2Stream* st = find(id);
      if (!st || st->handlerRunning || st->answered || st->closed) continue;
      if (st->headersTooLarge) {
        countLimit(Limit::kMaxHeaderBytes);
        st->reject(431,
                   "request header fields exceed " + std::to_string(config_->maxHeaderBytes) +
                       " bytes (server.max_header_bytes)",
                   "headers_too_large");
      } else if (st->hasDeclaredLength && st->declaredLength > config_->maxRequestBytes) {
        countLimit(Limit::kMaxRequestBytes);
        st->reject(413,
                   "request body exceeds the limit of " + std::to_string(config_->maxRequestBytes) +
                       " bytes (server.max_request_bytes)",
                   "request_too_large");
      } else {
        launch(*st);
      }
    }
    breakUploadDeadlock(false);
  }

  void launch(H2Stream& st) {
    st.handlerRunning = true;
    st.answered = true;
    st.exchange.response = &st;
    // END_STREAM on the HEADERS frame: there is no body to read.
    bool noBody = st.requestComplete && st.held == 0 && !st.tooLarge();
    st.exchange.bodySource = noBody ? nullptr : &st;
    auto self = this->shared_from_this();
    // The stream is released only once the spawn has completed (handlerDone):
    // until then the coroutine's cancellation state lives in st.cancel.
    asio::co_spawn(stream_.get_executor(), self->runHandler(st.id),
                   asio::bind_cancellation_slot(
                       st.cancel->slot(), [self, id = st.id, sig = st.cancel](std::exception_ptr) {
                         self->handlerDone(id);
                       }));
  }

  void handlerDone(std::int32_t id) {
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    H2Stream& st = *it->second;
    st.handlerRunning = false;
    st.handlerFinished = true;
    if (st.closed) {
      erase(it);
    } else if (!st.requestComplete) {
      release(st);  // the body is nobody's any more
      payOwedWindow();
    }
  }

  Task<void> runHandler(std::int32_t id) {
    auto self = this->shared_from_this();
    H2Stream* st = find(id);
    st->open.emplace(registration_.registry());  // ends with the stream
    try {
      co_await handler_(st->exchange);
    } catch (const std::exception&) {
      // Cancellation (stream reset, connection gone) or a bug: settled below.
    }
    st->completeAfterHandler();
    wakeWriter();
  }

  // I/O ------------------------------------------------------------------------

  Task<void> readLoop() {
    auto self = this->shared_from_this();
    if (!initial_.empty()) {
      bool ok = feed(initial_.data(), initial_.size());
      initial_.clear();
      initial_.shrink_to_fit();
      if (!ok) co_return;
    }
    // h2c: edge reads (relay/net/edge_read.hpp), one recv per arrival; TLS:
    // reads through the stream into the same buffer.
    ReadBuffer inbox;
    while (!closed_) {
      std::tuple<boost::system::error_code, std::size_t> read;
      if constexpr (std::is_same_v<Stream, tcp::socket>) {
        read = co_await asyncEdgeRead(stream_, inbox, kReadChunk, kTuple);
      } else {
        read = co_await stream_.async_read_some(inbox.prepare(kReadChunk), kTuple);
        inbox.commit(std::get<1>(read));
      }
      const auto [ec, n] = read;
      if (ec) break;
      lastActivity_ = SteadyClock::now();
      const bool fed = feed(static_cast<const char*>(inbox.data().data()), n);
      inbox.consume(n);
      if (!fed) co_return;
      if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) break;
    }
    closeNow();
  }

  // Hands bytes to nghttp2; on a connection error queues GOAWAY and lets the
  // writer flush it before closing.
  bool feed(const char* data, std::size_t n) {
    ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(data), n);
    if (rv < 0 || flooded_) {
      bool flood = flooded_ || rv == NGHTTP2_ERR_FLOODED;
      countLimit(flood ? Limit::kHttp2Flood : Limit::kHttp2Protocol);
      nghttp2_session_terminate_session(session_,
                                        flood ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR);
      processEvents();
      terminating_ = true;
      wakeWriter();
      return false;
    }
    processEvents();
    wakeWriter();
    return true;
  }

  Task<void> writeLoop() {
    auto self = this->shared_from_this();
    std::string out;
    while (!closed_) {
      writeRequested_ = false;
      payOwedWindow();
      out.clear();
      while (out.size() < kWriteBatch) {
        const std::uint8_t* data = nullptr;
        ssize_t n = nghttp2_session_mem_send(session_, &data);
        if (n < 0) {
          closeNow();
          co_return;
        }
        if (n == 0) break;
        out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
      }
      stopUploads();
      if (!out.empty()) {
        writeStartedAt_ = SteadyClock::now();
        auto [ec, n] = co_await asio::async_write(stream_, asio::buffer(out), kTuple);
        writeStartedAt_.reset();
        if (ec) {
          closeNow();
          co_return;
        }
        continue;
      }
      if ((!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) ||
          (draining_ && streams_.empty()) ||
          (terminating_ && !nghttp2_session_want_write(session_))) {
        closeNow();  // GOAWAY sent and nothing left to do
        co_return;
      }
      if (writeRequested_) continue;
      writerWake_.expires_at(SteadyClock::time_point::max());
      co_await writerWake_.async_wait(kTuple);
    }
  }

  // RST_STREAM(NO_ERROR) for streams whose answer ended before their upload
  // did (recorded by onFrameSend, so it follows their END_STREAM on the wire).
  void stopUploads() {
    for (std::int32_t id : stopUploads_) {
      if (nghttp2_session_get_stream_remote_close(session_, id) == 0) {
        nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR);
        writeRequested_ = true;
      }
    }
    stopUploads_.clear();
  }

  // Four times per header_timeout (or idle_timeout if shorter): closes a connection
  // idle for idle_timeout, resets streams whose request head has not arrived
  // whole within header_timeout (a slow-loris client) and streams whose
  // response the client's flow-control window has held back for idle_timeout,
  // and closes a connection whose peer has not taken a byte of ours for
  // idle_timeout (a write that never completes would also keep every
  // RST_STREAM we queue from being sent).
  Task<void> idleWatch() {
    auto self = this->shared_from_this();
    lastActivity_ = SteadyClock::now();
    // A quarter of the shorter timeout: deadlines are met within 25 %.
    const auto tick = std::max(std::chrono::milliseconds(10),
                               std::min(config_->headerTimeout, config_->idleTimeout) / 4);
    while (!closed_) {
      idleTimer_.expires_after(tick);
      co_await idleTimer_.async_wait(kTuple);
      if (closed_) break;
      const auto now = SteadyClock::now();
      if (writeStartedAt_ && now - *writeStartedAt_ >= config_->idleTimeout) {
        countLimit(Limit::kWriteStall);
        closeNow();
        break;
      }
      if (streams_.empty()) {
        if (now >= lastActivity_ + config_->idleTimeout) {
          countLimit(Limit::kIdleTimeout);
          nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
          terminating_ = true;
          wakeWriter();
          break;
        }
        continue;
      }
      lastActivity_ = now;
      // Uploads that fill the budget and sent nothing for a whole tick.
      if (!dataSinceTick_) breakUploadDeadlock(true);
      dataSinceTick_ = false;
      bool reset = false;
      for (auto& [id, st] : streams_) {
        if (!st->headDone && !st->answered && now - st->openedAt >= config_->headerTimeout) {
          st->answered = true;  // never launched now
          countLimit(Limit::kHeaderTimeout);
          nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
          reset = true;
        }
        // A response the client's window has held back for idle_timeout:
        // the client takes nothing (a zero window is the slow-read attack),
        // and the stream would hold its buffer and the connection for ever.
        if (st->awaitingWindow() && !st->stallReset && now - st->lastSent >= config_->idleTimeout) {
          st->stallReset = true;
          countLimit(Limit::kWriteStall);
          nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
          reset = true;
        }
      }
      if (reset) wakeWriter();
    }
  }

  // Every way a connection ends (the peer left, GOAWAY flushed after a
  // protocol error, a flood or the idle timeout, nghttp2 done): its streams
  // learn it here, so a handler still reading a body or streaming an answer
  // is cancelled, and its upstream request with it, instead of running on
  // for a connection nobody reads.
  void closeNow() {
    if (closed_) return;
    closed_ = true;
    for (auto& [id, st] : streams_)
      st->peerClosed(NGHTTP2_NO_ERROR);
    boost::system::error_code ec;
    lowestLayer(stream_).close(ec);
    writerWake_.cancel();
    idleTimer_.cancel();
  }

  struct Consume {
    std::int32_t id;
    std::size_t stream;
  };

  Stream stream_;
  std::string initial_;
  std::shared_ptr<const SessionConfig> config_;
  std::shared_ptr<void> slot_;
  Handler handler_;
  asio::steady_timer writerWake_;
  asio::steady_timer idleTimer_;
  Registration registration_;
  nghttp2_session* session_ = nullptr;
  Streams streams_;
  std::vector<std::int32_t> events_;
  std::vector<std::int32_t> stopUploads_;
  std::vector<Consume> consumes_;
  std::string peer_;
  SteadyClock::time_point lastActivity_{};
  std::optional<SteadyClock::time_point> writeStartedAt_;  // set while a write is in flight
  std::int32_t connectionWindow_ = 65535;
  std::uint64_t connHeld_ = 0;    // request-body bytes in memory, all streams
  std::uint64_t windowStep_ = 1;  // connection window given back at least this much at a time
  double controlAllowance_ = kControlBurst;
  SteadyClock::time_point controlRefilledAt_{};
  bool flooded_ = false;
  bool bodyBudgetFull_ = false;  // counted once per time the budget fills
  bool dataSinceTick_ = false;   // DATA arrived since idleWatch's last tick
  bool terminating_ = false;
  bool writeRequested_ = false;
  bool closed_ = false;
  bool draining_ = false;
};

}  // namespace

void startHttp2(tcp::socket socket, std::string initial, SessionContext context, Handler handler) {
  std::make_shared<H2Session<tcp::socket>>(std::move(socket), std::move(initial),
                                           std::move(context), std::move(handler))
      ->start();
}

void startHttp2(TlsStream stream, SessionContext context, Handler handler) {
  std::make_shared<H2Session<TlsStream>>(std::move(stream), std::string(), std::move(context),
                                         std::move(handler))
      ->start();
}

}  // namespace relay::net
