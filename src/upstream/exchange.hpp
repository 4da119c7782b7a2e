// One HTTP/1.1 exchange on an upstream connection (private to upstream/):
// the request written, the response head read, then the body piece by piece.
// The connection goes back to where it came from only after a body was read
// to its end with keep-alive; after any failure it is closed, never reused.
//
// Where connections come from (the pool, connecting) is client.cpp's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>

#include <boost/system/error_code.hpp>

#include "connection.hpp"
#include "relay/net/http1_parser.hpp"

namespace relay::upstream {

// Where an exchange hands back a connection that can carry another request
// (ClientPool's idle lists).
class ConnectionHome {
 public:
  virtual void giveBack(std::unique_ptr<Connection> c) = 0;

 protected:
  ~ConnectionHome() = default;
};

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

class Exchange final : public ResponseStream {
 public:
  // At most this many 1xx answers before the final one (each has its own
  // head limit; all of them fall under the first-byte deadline).
  static constexpr int kMaxInterimAnswers = 8;
  // One head (status line to the blank line that ends it) is at most this
  // long; the connection buffer then holds at most this plus one read.
  static constexpr std::size_t kMaxHeadBytes = 64 * 1024;

  Exchange(std::shared_ptr<ConnectionHome> home, std::unique_ptr<Connection> conn,
           const Deadlines& deadlines);

  // The request written and the response head read, in steps that
  // ClientPool::send() drives from its own coroutine (a coroutine of the
  // exchange's own would cost a frame more per request):
  //
  //   if (!x.startRequest(req, target, now)) -> failed
  //   if (!x.requestSent()) { Task<bool> w = x.finishRequest(req); if (!co_await w) -> failed }
  //   std::optional<bool> head = x.headReady();
  //   while (!head) { auto r = x.readHeadBytes(); head = x.headAfter(co_await r); }
  //   *head: the final head is in (status(), headers()); false: failed
  //
  // Each step that returns false failed (failure() says how) and closed the
  // connection. `req` must outlive finishRequest()'s task.

  // Arms the first-byte deadline from `now` (a clock reading just taken)
  // and, on plain TCP, sends what the socket takes at once.
  bool startRequest(const OutgoingRequest& req, const Target& target, Clock::time_point now);
  bool requestSent() const { return requestBytesWritten_ == requestBytes_; }
  // The rest of the request (every TLS request, and what a full socket
  // buffer did not take).
  Task<bool> finishRequest(const OutgoingRequest& req);
  // The final head from what has arrived: nullopt while more must come.
  std::optional<bool> headReady() { return headFrom(parseHead()); }
  // One read of head bytes (its result goes to headAfter()).
  Task<std::tuple<boost::system::error_code, std::size_t>> readHeadBytes();
  std::optional<bool> headAfter(const std::tuple<boost::system::error_code, std::size_t>& read);

  // True when not one byte of the request reached the socket: only then may
  // it be sent again without counting as an attempt (the upstream cannot
  // have seen it, so it cannot have run or billed it).
  bool nothingSent() const { return requestBytesWritten_ == 0; }

  // ResponseStream
  int status() const override { return status_; }
  const Headers& headers() const override { return headers_; }
  const Failure& failure() const override { return failure_; }
  bool complete() const override { return done_; }
  void abort() override;
  Task<bool> read(std::string& out) override;
  Task<bool> readAll(std::string& out, std::uint64_t limit) override;
  std::optional<bool> readNow(std::string& out) override;
  std::optional<bool> readAllNow(std::string& out, std::uint64_t limit) override;
  Task<ReadWait> waitMore(std::string& out, Clock::time_point now) override;
  std::optional<bool> readAfter(const ReadWait& got, std::string& out) override;

 private:
  std::optional<boost::system::error_code> parseHead();
  std::optional<bool> headFrom(std::optional<boost::system::error_code> head);
  std::optional<boost::system::error_code> headAfterEmptyRead(const boost::system::error_code& rec);
  void newParser();
  boost::system::error_code parseBuffered(std::string& out, std::size_t& got);
  std::size_t parse(std::string_view in, std::string& out, std::size_t& got,
                    boost::system::error_code& error);
  bool tooLarge(std::uint64_t limit);
  bool fail(FailureKind kind, std::string detail, boost::system::error_code ec = {});
  void finishBody();

  std::shared_ptr<ConnectionHome> home_;
  std::unique_ptr<Connection> conn_;
  Deadlines deadlines_;
  Watchdog watchdog_;
  Headers headers_;  // before parser_, which fills it
  std::optional<UpstreamParser> parser_;
  int status_ = 0;
  Failure failure_;
  bool done_ = false;
  bool aborted_ = false;  // abort() closed the connection (shutdown), not the caller leaving
  std::size_t requestBytes_ = 0;  // head and body
  std::size_t requestBytesWritten_ = 0;
  std::string pendingHead_;  // the request head while finishRequest() writes it
  int interims_ = 0;         // 1xx answers so far
};

}  // namespace relay::upstream
