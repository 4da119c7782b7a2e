// HTTP/1.1 client to the upstreams, with a keep-alive pool per upstream.
//
// One `ClientPool` per worker (never shared between threads): connections are
// created, used and reused on the worker's event loop. A response body is read
// piece by piece as it arrives (SSE needs that; its events are capped by the
// stream transform), or whole up to a cap the caller gives; deadlines
// for connect, first byte, idle-between-reads and total end an exchange with a
// typed failure. Asio and Beast stay in client.cpp and exchange.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/system/error_code.hpp>

#include "relay/common/headers.hpp"
#include "relay/net/exchange.hpp"
#include "relay/upstream/target.hpp"

namespace relay::upstream {

using net::Task;
using Clock = std::chrono::steady_clock;

enum class FailureKind {
  kNone,
  kConnect,  // DNS, TCP connect refused/unreachable
  kTls,      // handshake or certificate verification
  kConnectTimeout,
  kFirstByteTimeout,  // no response head in time (time to first token for streams)
  kIdleTimeout,       // a gap between body reads
  kTotalTimeout,
  kReset,      // closed or reset by the upstream
  kProtocol,   // not valid HTTP/1.1
  kCancelled,  // our caller left (terminal cancellation): says nothing about the upstream
  kTooLarge,   // a body over the reader's cap (max_response_bytes)
};

struct Failure {
  FailureKind kind = FailureKind::kNone;
  std::string detail;  // for logs and error messages; never contains a secret
  explicit operator bool() const { return kind != FailureKind::kNone; }
};

// "connect_error", "timeout", ... — the names `retry.retry_on` uses.
std::string_view failureClass(FailureKind kind);
// A phrase for messages: "connection refused", "first byte timeout (15000 ms)".
std::string describe(const Failure& failure);

struct Deadlines {
  std::chrono::milliseconds connect{3'000};
  std::chrono::milliseconds firstByte{15'000};
  std::chrono::milliseconds idle{30'000};
  Clock::time_point total = Clock::time_point::max();
  // The caller's clock reading as it calls send(), if it has one (the
  // epoch when not): the pool then reads no clock of its own before the
  // request leaves on a pooled connection.
  Clock::time_point sentAt{};
};

struct OutgoingRequest {
  std::string_view method = "POST";
  std::string_view path;  // "/v1/chat/completions"; a view: it must outlive the send
  // End-to-end fields; host, content-length and framing are added.
  // `sharedHead` (optional, a view that must outlive the send) is written
  // first, as it is: field lines ("name: value\r\n" each) that are the same
  // for every attempt of a request, serialised once.
  std::string_view sharedHead;
  // The upstream's own credential: "authorization: VALUE" after `sharedHead`
  // (empty: none). A view: it must outlive the send.
  std::string_view authorization;
  Headers headers;
  std::string_view body;  // must outlive the send
};

// The response to one request: head first, then the body as it arrives.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  virtual int status() const = 0;
  virtual const Headers& headers() const = 0;
  // Appends the next body bytes to `out`. Returns false at the end of the body
  // or on failure (then `failure()` says which).
  virtual Task<bool> read(std::string& out) = 0;
  // True once the body has been read to its end: the bytes the last read()
  // gave were the last (the next read() returns false with nothing).
  virtual bool complete() const = 0;
  // Reads the rest of the body into `out`, at most `limit` bytes (a body
  // declared or found larger fails with kTooLarge, unread). False on failure.
  virtual Task<bool> readAll(std::string& out, std::uint64_t limit) = 0;
  // read() and readAll() without waiting, for when the bytes they need are
  // already here (a JSON answer nearly always arrives with its head): the
  // same answer, or nullopt when the call would have to wait. Then the
  // caller calls read() or readAll(): read() carries on where readNow()
  // left off, and readAllNow() reads nothing unless it can read it all.
  // A caller that asks these first spares a coroutine frame for each call
  // that finds its bytes already received. By default they know nothing.
  virtual std::optional<bool> readNow(std::string& out) {
    (void)out;
    return std::nullopt;
  }
  virtual std::optional<bool> readAllNow(std::string& out, std::uint64_t limit) {
    (void)out;
    (void)limit;
    return std::nullopt;
  }
  // read() in steps, for a caller that reads a whole stream in a loop:
  //
  //   std::optional<bool> more = s.readNow(out);
  //   while (!more) {
  //     Task<ReadWait> wait = s.waitMore(out, Clock::now());
  //     const ReadWait got = co_await std::move(wait);
  //     more = s.readAfter(got, out);
  //   }
  //
  // The same answers as read(). The wait is the transport's own read, so a
  // stream that waits for each of its events costs no coroutine frame of
  // ours per event. By default the wait is read() itself and readAfter()
  // gives its answer. `now`: the time from which the wait's idle deadline
  // counts, the caller's last clock reading since the stream last brought
  // bytes (a caller that has just read the clock spares the transport a
  // reading per event).
  using ReadWait = std::tuple<boost::system::error_code, std::size_t>;
  virtual Task<ReadWait> waitMore(std::string& out, Clock::time_point now) {
    (void)now;
    steppedRead_ = co_await read(out);
    co_return ReadWait{};
  }
  virtual std::optional<bool> readAfter(const ReadWait& got, std::string& out) {
    (void)got;
    (void)out;
    return std::exchange(steppedRead_, std::nullopt);
  }
  virtual const Failure& failure() const = 0;
  // Closes the connection now; a pending read() ends with a failure. Used at
  // shutdown, so that an open stream can still be ended with an error event.
  virtual void abort() = 0;

 private:
  std::optional<bool> steppedRead_;  // read()'s answer, for the default readAfter()
};

// What the forwarding pipeline needs of the upstreams: send one request to
// upstream `index` and get its response head (or a typed failure). The seam
// between the retry/failover logic and the sockets: `ClientPool` implements it
// over real connections, unit tests with a scripted fake.
class UpstreamClient {
 public:
  virtual ~UpstreamClient() = default;
  // Sends `request` to upstream `index` and waits for the response head.
  // Returns null with `failure` set when there is no head (see FailureKind).
  virtual Task<std::unique_ptr<ResponseStream>> send(std::size_t index,
                                                     const OutgoingRequest& request,
                                                     const Deadlines& deadlines,
                                                     Failure& failure) = 0;
};

class ClientPool final : public UpstreamClient {
 public:
  struct UpstreamSpec {
    Target target;
    std::string caFile;  // "" = system trust store
    // Idle connections kept for reuse (upstreams[].max_idle_connections); one
    // handed back beyond them is closed.
    std::size_t maxIdle = 256;
    // How long one may stay idle (upstreams[].max_idle_ms): under the
    // upstream's own keep-alive timeout, so that a request never takes a
    // connection the upstream is closing.
    std::chrono::milliseconds maxIdleTime{50'000};
  };

  explicit ClientPool(std::vector<UpstreamSpec> upstreams);
  ~ClientPool() override;
  ClientPool(const ClientPool&) = delete;
  ClientPool& operator=(const ClientPool&) = delete;

  // Sends `request` to upstream `index` on a pooled connection (or a new one)
  // and waits for the response head. A pooled connection that fails before
  // one byte of the request was written is replaced once, transparently;
  // after that, a failure is the caller's to retry (or not). The stream returns
  // its connection to the pool when its body was read to the end.
  Task<std::unique_ptr<ResponseStream>> send(std::size_t index, const OutgoingRequest& request,
                                             const Deadlines& deadlines, Failure& failure) override;

  // Upstream `index`'s idle cap and time as a reload set them: the oldest
  // idle connections past the cap are closed now (those past the time on the
  // next closeStale()); the others stay for reuse.
  void setIdleLimits(std::size_t index, std::size_t maxIdle, std::chrono::milliseconds maxIdleTime);
  // Closes the connections idle for their upstream's maxIdleTime or longer
  // (the worker's tick: an upstream that no request went to since keeps
  // none open past that, each in CLOSE_WAIT once the upstream's own
  // keep-alive timeout closed its side).
  void closeStale(Clock::time_point now);
  // For a pool a reload replaced: its idle connections are closed now, and
  // each connection handed back later (by a request or stream that still
  // holds the pool) is closed rather than kept. No tick sweeps a replaced
  // pool, and a stream open for an hour would otherwise keep up to maxIdle
  // connections per upstream idle in it until the stream ended.
  void retire();

 private:
  struct Impl;  // the idle connections and TLS contexts (client.cpp)
  std::shared_ptr<Impl> impl_;
};

}  // namespace relay::upstream
