// One HTTP/2 stream as the pipeline sees it: a ResponseSink over a deferred
// nghttp2 data provider (private to net/).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nghttp2/nghttp2.h>

#include "relay/net/exchange.hpp"

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
};

class H2Stream final : public ResponseSink {
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

  // The peer closed or reset the stream, or the connection is gone: wake a
  // waiting write and cancel the handler (terminal, so its upstream read ends).
  void peerClosed(std::uint32_t errorCode);
  // After the handler returned: a response it never started becomes a 500, a
  // body it never finished becomes RST_STREAM (a truncation must not look whole).
  void completeAfterHandler();
  // 413 for a body over the cap, then RST_STREAM(NO_ERROR) to stop the upload.
  void rejectTooLarge(std::uint64_t limit);

  const std::int32_t id;
  Exchange exchange;
  // Shared with the handler's co_spawn completion: the spawned coroutine keeps
  // its cancellation state inside the signal's memory until it has completed,
  // which can be after nghttp2 closed (and we erased) the stream.
  std::shared_ptr<boost::asio::cancellation_signal> cancel =
      std::make_shared<boost::asio::cancellation_signal>();
  std::chrono::steady_clock::time_point openedAt = std::chrono::steady_clock::now();
  bool requestComplete = false;
  bool tooLarge = false;
  bool answered = false;  // a handler was launched or a rejection sent
  bool handlerRunning = false;
  bool closed = false;  // nghttp2 closed the stream

 private:
  static ssize_t readBody(nghttp2_session*, std::int32_t, std::uint8_t* buf, std::size_t length,
                          std::uint32_t* flags, nghttp2_data_source* source, void*);
  bool submit(const ResponseHead& head, bool withBody, std::size_t contentLength);
  void resume();

  H2Connection& connection_;
  std::string pending_;  // response bytes nghttp2 has not taken yet
  std::size_t pendingOffset_ = 0;
  bool started_ = false;
  bool bodyDone_ = false;              // finish() called: EOF once pending_ drains
  bool deferred_ = false;              // the data provider returned NGHTTP2_ERR_DEFERRED
  boost::asio::steady_timer drained_;  // a write waiting below high water
  bool waiting_ = false;
};

}  // namespace relay::net
