// One HTTP/2 stream as the pipeline sees it: a ResponseSink over a deferred
// nghttp2 data provider, and a BodySource over the DATA the connection hands
// it (private to net/).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nghttp2/nghttp2.h>

#include "relay/net/exchange.hpp"
#include "session_common.hpp"

namespace relay::net {

// What a stream needs from its connection.
class H2Connection {
 public:
  virtual ~H2Connection() = default;
  virtual nghttp2_session* session() = 0;
  // The writer drains nghttp2's output soon (never from inside a callback).
  virtual void wakeWriter() = 0;
  virtual boost::asio::any_io_executor executor() = 0;
  // How long a write may wait for the client to open its window.
  virtual std::chrono::milliseconds flushTimeout() const = 0;
  // The handler of stream `id` wants its body: grow the stream's window by
  // what it already holds and by whatever arrives from now on.
  virtual void bodyWanted(std::int32_t id) = 0;
  virtual std::uint64_t maxRequestBytes() const = 0;
  virtual std::uint64_t maxConnectionBodyBytes() const = 0;
  virtual std::chrono::milliseconds bodyTimeout() const = 0;
};

class H2Stream final : public ResponseSink, public BodySource {
 public:
  H2Stream(H2Connection& connection, std::int32_t id);

  // ResponseSink
  Task<bool> respond(ResponseHead head, std::string body) override;
  Task<bool> start(ResponseHead head) override;
  Task<bool> write(std::string_view bytes) override;
  Task<bool> finish() override;
  void abort() override;
  bool started() const override { return started_; }
  bool clientGone() const override { return closed; }

  // BodySource: waits for END_STREAM (or the cap, the body timeout, a reset).
  Task<BodyResult> readAll(std::string& out) override;
  // The body if END_STREAM came already (a small request: with its HEADERS).
  std::optional<BodyResult> readAllNow(std::string& out) override;

  // The connection hands over DATA of this stream (inside mem_recv; records
  // only). Returns false when the bytes are not kept (over the cap, or the
  // stream no longer wants them): the connection then frees their window at once.
  bool takeData(const std::uint8_t* data, std::size_t len);
  bool tooLarge() const { return tooLarge_; }
  // Lets go of the body so far, never to take more: readAll() answers
  // kNoRoom (the connection's uploads fill its budget, none whole).
  void refuseForRoom();
  // END_STREAM from the client (inside mem_recv; records only).
  void requestEnded();

  // The peer closed or reset the stream, or the connection is gone: wake a
  // waiting write or body read and cancel the handler (terminal, so its
  // upstream read ends).
  void peerClosed(std::uint32_t errorCode);
  // After the handler returned: a response it never started becomes a 500, a
  // body it never finished becomes RST_STREAM (a truncation must not look whole).
  void completeAfterHandler();
  // A response of the session's own (413, 431) to a request no handler saw.
  void reject(int status, std::string message, std::string_view code);

  // The response has bytes (or its end) to send and is not waiting for the
  // handler: only the client's flow-control window (or the socket) holds
  // them back. With lastSent, how the connection finds a client that never
  // opens its window.
  bool awaitingWindow() const { return awaitingWindow_ && !deferred_ && !closed; }

  const std::int32_t id;
  Exchange exchange;
  // Shared with the handler's co_spawn completion: the spawned coroutine keeps
  // its cancellation state inside the signal's memory until it has completed,
  // which can be after nghttp2 closed (and we erased) the stream.
  std::shared_ptr<boost::asio::cancellation_signal> cancel =
      std::make_shared<boost::asio::cancellation_signal>();
  std::chrono::steady_clock::time_point openedAt = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point headAt{};
  std::uint64_t headerBytes = 0;  // decoded header list size (RFC 7541 §4.1 sizes)
  std::uint64_t declaredLength = 0;
  bool hasDeclaredLength = false;
  bool headDone = false;         // the request HEADERS (and CONTINUATIONs) arrived
  bool headersTooLarge = false;  // over max_header_bytes: answered 431, never launched
  bool requestComplete = false;  // END_STREAM received
  bool answered = false;         // a handler was launched or a rejection sent
  // Counts this exchange as open for the drain until the stream is gone.
  std::optional<OpenExchange> open;
  bool handlerRunning = false;
  bool handlerFinished = false;
  bool rejected = false;         // answered by the session itself (413, 431)
  bool closed = false;           // nghttp2 closed the stream
  std::uint64_t held = 0;        // body bytes kept in memory (counted by the connection)
  std::uint64_t unconsumed = 0;  // held bytes whose stream window was not yet given back
  bool wantsBody = false;        // readAll() was called: grow the window as bytes arrive
  bool stallReset = false;       // reset for a window that stayed shut (idle_timeout_ms)
  bool resetCharged = false;     // a stream error it provoked drew from the flood allowance
  // When nghttp2 last took response bytes, or bytes became ready for it.
  std::chrono::steady_clock::time_point lastSent{};

 private:
  // A whole response of the session's own: its head and (unless HEAD) body.
  void answerWhole(const ResponseHead& head, std::string body);
  static ssize_t readBody(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                          std::uint32_t* flags, nghttp2_data_source* source, void*);
  bool submit(const ResponseHead& head, bool withBody, std::size_t contentLength);
  void resume();
  void wakeBodyReader();
  // The whole body (END_STREAM came) into `out`, checked against its content-length.
  BodyResult takeBody(std::string& out);

  H2Connection& connection_;
  std::string pending_;  // response bytes nghttp2 has not taken yet
  std::size_t pendingOffset_ = 0;
  std::size_t sentSinceStall_ = 0;  // bytes taken since lastSent last moved
  std::string received_;            // request body bytes so far
  bool tooLarge_ = false;
  bool noRoom_ = false;  // refuseForRoom()
  bool started_ = false;
  bool bodyDone_ = false;              // finish() called: EOF once pending_ drains
  bool deferred_ = false;              // the data provider returned NGHTTP2_ERR_DEFERRED
  bool awaitingWindow_ = false;        // a body was submitted and its end not yet sent
  boost::asio::steady_timer drained_;  // a write waiting below high water
  bool waiting_ = false;
  boost::asio::steady_timer bodyWake_;  // readAll() waiting for DATA
  bool bodyWaiting_ = false;
};

}  // namespace relay::net
