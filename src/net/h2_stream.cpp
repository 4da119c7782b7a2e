#include "h2_stream.hpp"

#include <cstring>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "relay/common/json_write.hpp"
#include "relay/common/limits.hpp"
#include "session_common.hpp"

namespace relay::net {
namespace {

// Above this many unsent response bytes a write() waits for the client to
// take some; with the upstream paused meanwhile, memory per stream is bounded.
constexpr std::size_t kHighWater = 64 * 1024;
// Bytes a caller must take within idle_timeout_ms, unless it takes all that waits.
constexpr std::size_t kStallProgress = 16 * 1024;

nghttp2_nv makeNv(std::string_view name, std::string_view value) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(), NGHTTP2_NV_FLAG_NONE};
}

bool hasBody(int status, std::string_view method) {
  return method != "HEAD" && status >= 200 && status != 204 && status != 304;
}

}  // namespace

H2Stream::H2Stream(H2Connection& connection, std::int32_t streamId)
    : id(streamId),
      connection_(connection),
      drained_(connection.executor()),
      bodyWake_(connection.executor()) {}

bool H2Stream::submit(const ResponseHead& head, bool withBody, std::size_t contentLength) {
  std::string status = std::to_string(head.status);
  std::string length = std::to_string(contentLength);
  std::vector<nghttp2_nv> nva;
  nva.reserve(head.headers.size() + 2);
  nva.push_back(makeNv(":status", status));
  for (const HeaderField& f : head.headers) {
    // Connection-specific fields are forbidden in HTTP/2 (RFC 9113 §8.2.2).
    if (isHopByHopHeader(f.name) || f.name == "content-length" || f.name == "host") continue;
    nva.push_back(makeNv(f.name, f.value));
  }
  if (contentLength != std::string::npos) nva.push_back(makeNv("content-length", length));
  awaitingWindow_ = withBody;
  lastSent = std::chrono::steady_clock::now();
  nghttp2_data_provider provider{};
  provider.source.ptr = this;
  provider.read_callback = &H2Stream::readBody;
  int rv = nghttp2_submit_response(connection_.session(), id, nva.data(), nva.size(),
                                   withBody ? &provider : nullptr);  // nva is copied
  connection_.wakeWriter();
  return rv == 0;
}

Task<bool> H2Stream::respond(ResponseHead head, std::string body) {
  if (closed || started_) co_return false;
  started_ = true;
  bodyDone_ = true;
  bool withBody = hasBody(head.status, exchange.head.method) && !body.empty();
  std::size_t length = body.size();
  if (withBody) pending_ = std::move(body);
  co_return submit(head, withBody, length);
}

Task<bool> H2Stream::start(ResponseHead head) {
  if (closed || started_) co_return false;
  started_ = true;
  bool withBody = hasBody(head.status, exchange.head.method);
  if (!withBody) bodyDone_ = true;
  co_return submit(head, withBody, std::string::npos);
}

Task<bool> H2Stream::write(std::string_view bytes) {
  if (closed || !started_ || bodyDone_) co_return false;
  if (pendingOffset_ > kHighWater && pendingOffset_ * 2 > pending_.size()) {
    pending_.erase(0, pendingOffset_);
    pendingOffset_ = 0;
  }
  pending_.append(bytes);
  resume();
  while (!closed && pending_.size() - pendingOffset_ > kHighWater) {
    drained_.expires_after(connection_.flushTimeout());
    waiting_ = true;
    auto [ec] = co_await drained_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    waiting_ = false;
    if (!ec) {  // the client kept its window shut for the whole flush timeout
      countLimit(Limit::kWriteStall);
      abort();
      co_return false;
    }
  }
  co_return !closed;
}

Task<bool> H2Stream::finish() {
  if (closed || !started_ || bodyDone_) co_return false;
  bodyDone_ = true;
  resume();
  co_return true;
}

void H2Stream::abort() {
  if (closed) return;
  bodyDone_ = true;
  nghttp2_submit_rst_stream(connection_.session(), NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
  connection_.wakeWriter();
}

void H2Stream::resume() {
  if (deferred_) {
    deferred_ = false;
    lastSent = std::chrono::steady_clock::now();  // the stall clock starts with bytes to send
    nghttp2_session_resume_data(connection_.session(), id);
  }
  connection_.wakeWriter();
}

ssize_t H2Stream::readBody(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                           std::uint32_t* flags, nghttp2_data_source* source, void*) {
  auto& st = *static_cast<H2Stream*>(source->ptr);
  std::size_t avail = st.pending_.size() - st.pendingOffset_;
  if (avail == 0) {
    if (st.bodyDone_) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      st.awaitingWindow_ = false;
      return 0;
    }
    st.deferred_ = true;  // resumed by the next write() or finish()
    return NGHTTP2_ERR_DEFERRED;
  }
  std::size_t n = std::min(avail, length);
  std::memcpy(buf, st.pending_.data() + st.pendingOffset_, n);
  st.pendingOffset_ += n;
  // The stall clock starts again on progress: kStallProgress bytes, or all
  // that was waiting. A window opened a byte at a time (WINDOW_UPDATE of 1
  // now and then) is not progress, and would otherwise hold the stream's
  // answer for ever.
  st.sentSinceStall_ += n;
  if (st.sentSinceStall_ >= kStallProgress || n == avail) {
    st.lastSent = std::chrono::steady_clock::now();
    st.sentSinceStall_ = 0;
  }
  if (st.pendingOffset_ == st.pending_.size()) {
    st.pending_.clear();
    st.pendingOffset_ = 0;
    if (st.bodyDone_) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      st.awaitingWindow_ = false;
    }
  }
  // Waking the writer's timer posts a completion; it does not call nghttp2.
  if (st.waiting_ && st.pending_.size() - st.pendingOffset_ <= kHighWater) st.drained_.cancel();
  return static_cast<ssize_t>(n);
}

// Request body ----------------------------------------------------------------

bool H2Stream::takeData(const std::uint8_t* data, std::size_t len) {
  // Kept only for a handler that runs (or is about to): a rejected stream's
  // or a finished handler's bytes are nobody's.
  if (!headDone || rejected || handlerFinished || tooLarge_ || noRoom_) return false;
  if (received_.size() + len > connection_.maxRequestBytes()) {
    tooLarge_ = true;
    countLimit(Limit::kMaxRequestBytes);
    received_.clear();
    received_.shrink_to_fit();
    wakeBodyReader();
    return false;
  }
  received_.append(reinterpret_cast<const char*>(data), len);
  wakeBodyReader();
  return true;
}

void H2Stream::refuseForRoom() {
  noRoom_ = true;
  received_.clear();
  received_.shrink_to_fit();
  wakeBodyReader();
}

void H2Stream::requestEnded() {
  requestComplete = true;
  wakeBodyReader();
}

void H2Stream::wakeBodyReader() {
  if (bodyWaiting_) bodyWake_.cancel();
}

Task<BodyResult> H2Stream::readAll(std::string& out) {
  if (!wantsBody) {
    wantsBody = true;
    connection_.bodyWanted(id);
  }
  const auto deadline = headAt + connection_.bodyTimeout();
  for (;;) {
    if (tooLarge_) {
      co_return BodyResult{BodyStatus::kTooLarge,
                           "request body exceeds the limit of " +
                               std::to_string(connection_.maxRequestBytes()) +
                               " bytes (server.max_request_bytes)"};
    }
    if (noRoom_) {
      co_return BodyResult{
          BodyStatus::kNoRoom,
          "this connection's uploads in progress fill server.max_connection_body_bytes (" +
              std::to_string(connection_.maxConnectionBodyBytes()) +
              " bytes) and none is whole: this one, the latest, was refused so that the others "
              "can finish; send it again"};
    }
    if (requestComplete) break;
    if (closed) co_return BodyResult{BodyStatus::kGone, {}};
    if (std::chrono::steady_clock::now() >= deadline) {
      countLimit(Limit::kBodyTimeout);
      co_return BodyResult{BodyStatus::kTimeout,
                           "the request body did not arrive within " +
                               std::to_string(connection_.bodyTimeout().count()) +
                               " ms of its head (server.body_timeout_ms)"};
    }
    bodyWake_.expires_at(deadline);
    bodyWaiting_ = true;
    co_await bodyWake_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    bodyWaiting_ = false;
  }
  co_return takeBody(out);
}

std::optional<BodyResult> H2Stream::readAllNow(std::string& out) {
  if (tooLarge_ || noRoom_ || !requestComplete) return std::nullopt;  // readAll() words it
  if (!wantsBody) {
    wantsBody = true;
    connection_.bodyWanted(id);
  }
  return takeBody(out);
}

BodyResult H2Stream::takeBody(std::string& out) {
  if (hasDeclaredLength && received_.size() != declaredLength) {
    return BodyResult{BodyStatus::kMalformed,
                      "the request body's length differs from its content-length"};
  }
  if (out.empty()) {
    out = std::move(received_);
  } else {
    out.append(received_);
  }
  received_.clear();
  return BodyResult{};
}

// Ends ------------------------------------------------------------------------

void H2Stream::peerClosed(std::uint32_t errorCode) {
  if (closed) return;
  closed = true;
  if (waiting_) drained_.cancel();
  wakeBodyReader();
  // A stream closed after our whole response went out is simply done; only an
  // unfinished one means the client gave up (RST_STREAM, connection lost).
  if (handlerRunning &&
      (errorCode != NGHTTP2_NO_ERROR || !bodyDone_ || pending_.size() != pendingOffset_))
    cancel->emit(boost::asio::cancellation_type::terminal);
}

void H2Stream::completeAfterHandler() {
  if (closed) return;
  if (!started_) {
    answerWhole(sessionErrorHead(500, exchange.head.headers.get("x-request-id")),
                openAiErrorJson("the gateway failed to produce a response", "server_error",
                                "internal_error"));
  } else if (!bodyDone_) {
    abort();
  }
}

void H2Stream::reject(int status, std::string message, std::string_view code) {
  answered = true;
  rejected = true;
  answerWhole(sessionErrorHead(status, exchange.head.headers.get("x-request-id")),
              sessionErrorBody(message, code));
}

void H2Stream::answerWhole(const ResponseHead& head, std::string body) {
  started_ = true;
  bodyDone_ = true;
  std::size_t length = body.size();
  // An answer to HEAD has no content (RFC 9110 §9.3.2), only its length: a
  // client's HTTP/2 stack treats DATA there as a protocol error.
  const bool withBody = hasBody(head.status, exchange.head.method);
  if (withBody) pending_ = std::move(body);
  submit(head, withBody, length);
}

}  // namespace relay::net
