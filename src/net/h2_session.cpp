// HTTP/2 server session on nghttp2 (1.52: mem_recv / mem_send, data providers).
//
// Shape (after nghttpx's shrpx_http2_upstream): one reader coroutine feeds
// bytes to nghttp2_session_mem_recv; one writer coroutine drains
// nghttp2_session_mem_send into the socket. nghttp2 callbacks only record what
// happened (a request completed, a stream closed); the session acts on it after
// mem_recv returns — nothing calls into nghttp2 from inside its own callbacks.
//
// Each complete request becomes an Exchange whose handler runs as its own
// coroutine with its own cancellation slot; RST_STREAM from the client cancels
// that handler only. Response bodies go through a per-stream buffer behind a
// deferred data provider: the handler's write() appends and resumes the
// provider, and waits while the buffer is above its high-water mark — which is
// where a client's flow-control window becomes backpressure on the upstream
// read. A stream stuck behind a closed window longer than the flush timeout is
// reset.
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
#include "session_common.hpp"

namespace relay::net {
namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kReadChunk = 16 * 1024;
constexpr std::size_t kWriteBatch = 64 * 1024;

template <class Stream>
class H2Session final : public H2Connection,
                        public Drainable,
                        public std::enable_shared_from_this<H2Session<Stream>> {
 public:
  H2Session(Stream stream, std::string initial, SessionContext context, Handler handler)
      : stream_(std::move(stream)),
        initial_(std::move(initial)),
        config_(std::move(context.config)),
        handler_(std::move(handler)),
        writerWake_(stream_.get_executor()),
        idleTimer_(stream_.get_executor()),
        registration_(context.registry, this) {
    peer_ = peerAddress(lowestLayer(stream_));
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
    int rv = nghttp2_session_server_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    if (rv != 0) return false;
    const auto& h2 = config_->http2;
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, h2.maxConcurrentStreams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, h2.initialWindowBytes},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    };
    if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0)
      return false;
    // Let the connection-level window match the streams' so that one large
    // upload does not stall every other stream.
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                          static_cast<std::int32_t>(h2.initialWindowBytes) * 4);
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
    H2Stream* st = self(user).find(frame->hd.stream_id);
    if (!st || st->requestComplete) return 0;  // trailers are ignored
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
      if (len > self(user).config_->maxRequestBytes) st->tooLarge = true;
    } else if (!isHopByHopHeader(n)) {
      head.headers.add(n, v);
    }
    return 0;
  }

  static int onDataChunk(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                         std::size_t len, void* user) {
    H2Session& s = self(user);
    H2Stream* st = s.find(id);
    if (!st || st->tooLarge) return 0;
    if (st->exchange.body.size() + len > s.config_->maxRequestBytes) {
      st->tooLarge = true;
      st->exchange.body.clear();
      s.events_.push_back(id);  // answered with 413 at once, before the rest arrives
      return 0;
    }
    st->exchange.body.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  static int onFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    H2Session& s = self(user);
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      H2Stream* st = s.find(frame->hd.stream_id);
      if (st && !st->requestComplete) {
        st->requestComplete = true;
        s.events_.push_back(frame->hd.stream_id);
      }
    } else if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      H2Stream* st = s.find(frame->hd.stream_id);
      if (st && st->tooLarge) s.events_.push_back(frame->hd.stream_id);
    }
    return 0;
  }

  static int onStreamClose(nghttp2_session*, std::int32_t id, std::uint32_t errorCode, void* user) {
    H2Session& s = self(user);
    auto it = s.streams_.find(id);
    if (it == s.streams_.end()) return 0;
    H2Stream& st = *it->second;
    st.peerClosed(errorCode);  // wakes a waiting write; cancels a running handler
    if (!st.handlerRunning) s.streams_.erase(it);  // nghttp2 no longer refers to it
    return 0;
  }

  H2Stream* find(std::int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second.get();
  }

  // After mem_recv: act on what the callbacks recorded ------------------------

  void processEvents() {
    std::vector<std::int32_t> events;
    events.swap(events_);
    for (std::int32_t id : events) {
      H2Stream* st = find(id);
      if (!st || st->handlerRunning || st->answered) continue;
      if (st->tooLarge) {
        st->answered = true;
        st->rejectTooLarge(config_->maxRequestBytes);
        continue;
      }
      if (!st->requestComplete) continue;
      launch(*st);
    }
  }

  void launch(H2Stream& st) {
    st.handlerRunning = true;
    st.answered = true;
    st.exchange.response = &st;
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
    H2Stream* st = find(id);
    if (!st) return;
    st->handlerRunning = false;
    if (st->closed) streams_.erase(id);
  }

  Task<void> runHandler(std::int32_t id) {
    auto self = this->shared_from_this();
    H2Stream* st = find(id);
    registration_.exchangeStarted();
    try {
      co_await handler_(st->exchange);
    } catch (const std::exception&) {
      // Cancellation (stream reset, connection gone) or a bug: settled below.
    }
    registration_.exchangeEnded();
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
    std::vector<char> buf(kReadChunk);
    while (!closed_) {
      auto [ec, n] = co_await stream_.async_read_some(asio::buffer(buf), kTuple);
      if (ec) break;
      lastActivity_ = SteadyClock::now();
      if (!feed(buf.data(), n)) co_return;
      if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) break;
    }
    connectionGone();
  }

  // Hands bytes to nghttp2; on a connection error queues GOAWAY and lets the
  // writer flush it before closing.
  bool feed(const char* data, std::size_t n) {
    ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const std::uint8_t*>(data), n);
    if (rv < 0) {
      nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
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
      if (!out.empty()) {
        writeStartedAt_ = SteadyClock::now();
        auto [ec, n] = co_await asio::async_write(stream_, asio::buffer(out), kTuple);
        writeStartedAt_.reset();
        if (ec) {
          connectionGone();
          co_return;
        }
        continue;
      }
      if ((!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) ||
          (draining_ && streams_.empty())) {
        closeNow();  // GOAWAY sent and nothing left to do
        co_return;
      }
      if (writeRequested_) continue;
      writerWake_.expires_at(SteadyClock::time_point::max());
      co_await writerWake_.async_wait(kTuple);
    }
  }

  // Closes a connection that has had no open stream for the idle timeout.
  // Once per header_timeout (or idle_timeout if shorter): closes a connection
  // idle for idle_timeout, resets streams whose request has not arrived whole
  // within header_timeout (a slow-loris client), and closes a connection whose
  // peer has not taken a byte of ours for idle_timeout (a write that never
  // completes would also keep every RST_STREAM we queue from being sent).
  Task<void> idleWatch() {
    auto self = this->shared_from_this();
    lastActivity_ = SteadyClock::now();
    const auto tick = std::min(config_->headerTimeout, config_->idleTimeout);
    while (!closed_) {
      idleTimer_.expires_after(tick);
      co_await idleTimer_.async_wait(kTuple);
      if (closed_) break;
      const auto now = SteadyClock::now();
      if (writeStartedAt_ && now - *writeStartedAt_ >= config_->idleTimeout) {
        connectionGone();
        break;
      }
      if (streams_.empty()) {
        if (now >= lastActivity_ + config_->idleTimeout) {
          nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
          wakeWriter();
          break;
        }
        continue;
      }
      lastActivity_ = now;
      bool reset = false;
      for (auto& [id, st] : streams_) {
        if (!st->requestComplete && !st->answered && now - st->openedAt >= config_->headerTimeout) {
          st->answered = true;  // never launched now
          nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
          reset = true;
        }
      }
      if (reset) wakeWriter();
    }
  }

  void connectionGone() {
    if (closed_) return;
    for (auto& [id, st] : streams_)
      st->peerClosed(NGHTTP2_NO_ERROR);
    closeNow();
  }

  void closeNow() {
    closed_ = true;
    boost::system::error_code ec;
    lowestLayer(stream_).close(ec);
    writerWake_.cancel();
    idleTimer_.cancel();
  }

  Stream stream_;
  std::string initial_;
  std::shared_ptr<const SessionConfig> config_;
  Handler handler_;
  asio::steady_timer writerWake_;
  asio::steady_timer idleTimer_;
  Registration registration_;
  nghttp2_session* session_ = nullptr;
  Streams streams_;
  std::vector<std::int32_t> events_;
  std::string peer_;
  SteadyClock::time_point lastActivity_{};
  std::optional<SteadyClock::time_point> writeStartedAt_;  // set while a write is in flight
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
