// The protocol-neutral seam between HTTP sessions and everything above them.
//
// An HTTP/1.1 or HTTP/2 session turns bytes into one `Exchange` per request and
// runs the listener's `Handler` on it as a coroutine on the connection's worker
// thread. The handler answers through `ResponseSink`; nothing above this header
// sees a Beast or nghttp2 type, or knows which HTTP version is in use.
//
// Cancellation crosses the seam through Asio's per-operation cancellation: the
// session runs the handler with a cancellation slot and emits a *terminal*
// cancellation when the caller goes away (socket closed, RST_STREAM). Any
// `co_await` on an asynchronous operation inside the handler then fails with
// `operation_aborted`, so an upstream read is abandoned at once.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "relay/common/headers.hpp"

namespace relay::net {

template <class T>
using Task = boost::asio::awaitable<T>;

enum class Protocol { kHttp1, kHttp2 };

struct RequestHead {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query, e.g. "/v1/chat/completions"
  std::string query;   // what followed '?', without it
  Headers headers;     // end-to-end fields only; names lowercase; no connection-specific fields
  Protocol protocol = Protocol::kHttp1;
  bool tls = false;
  std::string peer;  // client address "ip:port"
  // When the head was whole, by the session's clock reading (the request's
  // start for its timing); the epoch when the session has none to give.
  std::chrono::steady_clock::time_point receivedAt{};
};

struct ResponseHead {
  int status = 200;
  Headers
      headers;  // end-to-end fields; the session adds framing (content-length, chunked, :status)
  // A streamed head may wait for the first body bytes and leave in the same
  // write (HTTP/1.1). For streams whose first bytes follow at once (a relayed
  // chat stream); never for one a client must see open before anything is
  // sent (an MCP or event stream).
  bool withFirstBytes = false;
};

// Implemented by the HTTP/1.1 and HTTP/2 sessions.
//
// A response is either `respond()` (whole body known) or `start()`, any number of
// `write()`s and `finish()`. Every method returns false once the client is gone;
// the producer then stops. Calls are made from the connection's worker thread,
// one at a time (never two outstanding).
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;

  // Status, headers and the whole body, with its length.
  virtual Task<bool> respond(ResponseHead head, std::string body) = 0;
  // respond() without suspending, where the sink can: the answer is given
  // (true; false: the caller is gone or an answer was already started) and
  // `body` may have been moved from. nullopt: nothing was done, co_await
  // respond(). An HTTP/1.1 session writes what the socket takes at once and
  // keeps the rest to write itself when the handler has returned.
  virtual std::optional<bool> respondNow(ResponseHead& /*head*/, std::string& /*body*/) {
    return std::nullopt;
  }

  // Status and headers of a streamed body (chunked on HTTP/1.1, DATA frames on HTTP/2).
  virtual Task<bool> start(ResponseHead head) = 0;

  // Queues `bytes` (copied before the first suspension). Completes when the peer
  // has taken them or the session's pending output is under its high-water mark:
  // this is the backpressure that pauses the upstream read of a slow client.
  virtual Task<bool> write(std::string_view bytes) = 0;
  // write() without suspending, where the sink can: true/false as write()
  // would answer; nullopt: co_await write(bytes) at once, with the same
  // bytes — the same view, unchanged and alive until that write() completes
  // — and no other call before it. A sink may have begun them: an HTTP/1.1
  // session sends what the socket takes and keeps only where it stopped;
  // its write() sends the rest of those same bytes. Any other call instead
  // (other bytes, finish(), finishWith()) ends the connection.
  virtual std::optional<bool> writeNow(std::string_view /*bytes*/) { return std::nullopt; }

  // Ends the body.
  virtual Task<bool> finish() = 0;
  // Writes `last` and ends the body, in one write where the protocol allows.
  // (Defined in exchange.cpp: a coroutine's frame type defined in every
  // translation unit that includes this header differs in its compiler
  // temporaries' names, which a link-time-optimised link flags as an ODR
  // violation.)
  virtual Task<bool> finishWith(std::string_view last);

  // Ends the response abnormally: RST_STREAM on HTTP/2; a TCP reset on HTTP/1.1.
  // Used when nothing honest can be said any more (and by the mock's fault modes).
  virtual void abort() = 0;

  // True once `respond()` or `start()` was called: from here on a failure can no
  // longer become an HTTP status, and a retry would duplicate output.
  virtual bool started() const = 0;
  virtual bool clientGone() const = 0;
};

// How reading a request body ended. Anything but kComplete leaves the
// connection unusable for another request: the session closes it (HTTP/1.1)
// or resets the stream (HTTP/2) once the handler has answered.
enum class BodyStatus {
  kComplete,
  kTooLarge,   // over server.max_request_bytes: answer 413
  kTimeout,    // not whole within server.body_timeout_ms: answer 408
  kMalformed,  // bad chunked framing (HTTP/1.1) or a protocol error: answer 400
  kNoRoom,     // HTTP/2: refused so that the connection's other uploads can finish: 503
  kGone,       // the caller left: nobody to answer
};

struct BodyResult {
  BodyStatus status = BodyStatus::kComplete;
  std::string message;  // for the caller when not complete; names the limit and its config key
  bool ok() const { return status == BodyStatus::kComplete; }
  int httpStatus() const;  // 413, 408, 400, 503; 499 for kGone
  // "request_too_large", "request_timeout", "bad_request", "connection_body_budget_full"
  std::string_view code() const;
};

// The request body, read only when the handler asks for it: a caller is
// authenticated on the request head, so a request with a bad key is refused
// before any body byte is read (and, on HTTP/2, before its flow-control window
// grows). Implemented by the sessions.
class BodySource {
 public:
  virtual ~BodySource() = default;
  // Appends the whole body to `out` (at most max_request_bytes, within
  // body_timeout_ms). Sends "100 Continue" first when the caller asked for it.
  virtual Task<BodyResult> readAll(std::string& out) = 0;
  // The same answer without suspending, when it is already known (the whole
  // body arrived with the head — the common case of a small request); nullopt
  // when only readAll() can give it. Whatever it consumed, readAll() goes on
  // from there.
  virtual std::optional<BodyResult> readAllNow(std::string& /*out*/) { return std::nullopt; }
};

struct Exchange {
  RequestHead head;
  std::string body;  // empty until readBody() completed
  ResponseSink* response = nullptr;
  BodySource* bodySource = nullptr;  // nullptr: the request has no body

  // Reads the body into `body` once; later calls return the first result.
  Task<BodyResult> readBody();
  // readBody()'s result if it is known without waiting (see
  // BodySource::readAllNow); nullopt: co_await readBody().
  std::optional<BodyResult> readBodyNow();

 private:
  std::optional<BodyResult> bodyResult_;
};

// Runs once per request. Must answer through `exchange.response` unless the
// client went away; exceptions that escape become a 500 (or an abort if the
// response had started).
using Handler = std::function<Task<void>(Exchange& exchange)>;

}  // namespace relay::net
