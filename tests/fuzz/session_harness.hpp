// A client for fuzzing the server sessions of src/net (HTTP/1.1 and HTTP/2):
// the fuzzer's bytes are what the client sends, over a connected socket pair
// in one io_context, to a session started as the listener starts it, with a
// handler that reads the body and answers in several ways. The client takes
// everything the session sends, for the target to check.
//
// Input: one byte of options, then the client's bytes. The low two bits say
// how the client behaves (ClientEnd); every input ends with the session gone,
// in a fixed order of events, so a run does not depend on the clock except in
// kSilent, where the session's own (small) timeouts are what ends it.
//
// The socket pair is AF_UNIX in a tcp::socket: the sessions need a stream
// socket and nothing of TCP (the peer address reads "[::]:0"), and a pair
// needs no listener, port or TIME_WAIT per input.
#pragma once

#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "../../src/net/session_common.hpp"
#include "fuzz_check.hpp"

namespace relay::fuzz {

namespace asio = boost::asio;
using net::Exchange;
using net::Task;

// How the client behaves once its bytes are on their way.
enum class ClientEnd : std::uint8_t {
  // Waits until the session has done all it can with them, then half-closes.
  kQuietThenEof = 0,
  // Half-closes right behind its bytes: EOF arrives with the requests.
  kEofAtOnce = 1,
  // Sends, then says nothing and keeps the connection open: the session's
  // timeouts (a few ms here) must end it by themselves.
  kSilent = 2,
  // Sends its bytes in small pieces, each taken in before the next, then as
  // kQuietThenEof: every read boundary the session handles.
  kPieces = 3,
};

// The bounds as a listener sets them, small enough for inputs to reach them.
// Timeouts are long except for kSilent, so that no deadline passes while an
// input runs (and the run is the same every time).
inline net::SessionConfig sessionConfig(ClientEnd end) {
  net::SessionConfig c;
  c.maxRequestBytes = 4096;
  c.maxHeaderBytes = 1024;
  c.maxConnectionBodyBytes = 12288;
  c.http2.maxConcurrentStreams = 4;
  c.http2.initialWindowBytes = 8192;
  const std::chrono::milliseconds t =
      end == ClientEnd::kSilent ? std::chrono::milliseconds(5) : std::chrono::milliseconds(60'000);
  c.headerTimeout = c.bodyTimeout = c.idleTimeout = t;
  return c;
}

// What the handler saw, for the checks after the run.
struct HandlerLog {
  std::vector<std::string> methods;  // of every exchange a handler ran, in order
  std::vector<bool> delivered;       // its respond()/finish() returned true
  int running = 0;                   // handlers started and not yet returned
  bool cut = false;                  // a response was ended abnormally on purpose
};

// Fields that describe one hop: the sessions never hand them to a handler.
inline bool isConnectionField(std::string_view n) {
  return n == "connection" || n == "keep-alive" || n == "proxy-connection" ||
         n == "transfer-encoding" || n == "te" || n == "upgrade" || n == "trailer" ||
         n == "http2-settings" || n == "content-length";
}

inline void checkRequestHead(const net::RequestHead& head) {
  FUZZ_CHECK(!head.method.empty(), "a request reaches the handler with a method");
  for (const HeaderField& f : head.headers) {
    FUZZ_CHECK(!f.name.empty(), "header names are not empty");
    for (char c : f.name)
      FUZZ_CHECK(c < 'A' || c > 'Z', "header names are lowercase");
    FUZZ_CHECK(!isConnectionField(f.name), "connection-specific fields never reach a handler");
  }
}

// The handler; what it does follows the path's second character:
//   /n  refuses (401) without reading the body
//   /s  reads the body, streams the answer in three writes
//   /a  reads the body, starts an answer and aborts it
//   /h  reads the body, starts an answer and returns without finishing it
//   /x  reads the body and throws
//   /w  reads the body and waits: until the caller leaves, or 2 ms in kSilent
//   else reads the body and answers with its size (JSON)
// Every answer carries `x-seq`, the exchange's place in log.methods.
inline net::Handler fuzzHandler(std::shared_ptr<HandlerLog> log, ClientEnd end,
                                std::uint64_t maxRequestBytes) {
  return [log, end, maxRequestBytes](Exchange& ex) -> Task<void> {
    const std::size_t seq = log->methods.size();
    log->methods.push_back(ex.head.method);
    log->delivered.push_back(false);
    ++log->running;
    struct Running {
      HandlerLog* log;
      ~Running() { --log->running; }
    } running{log.get()};
    checkRequestHead(ex.head);
    const char kind = ex.head.path.size() > 1 ? ex.head.path[1] : '/';

    net::ResponseHead head;
    head.headers.add("x-seq", std::to_string(seq));
    head.headers.add("content-type", "application/json");
    if (kind == 'n') {
      head.status = 401;
      std::string body = R"({"error":{"message":"no key"}})";
      log->delivered[seq] = co_await ex.response->respond(std::move(head), std::move(body));
      co_return;
    }
    net::BodyResult read = co_await ex.readBody();
    if (read.ok()) {
      FUZZ_CHECK(ex.body.size() <= maxRequestBytes, "a body over max_request_bytes was accepted");
    } else {
      FUZZ_CHECK(read.status != net::BodyStatus::kComplete, "a failed read says why");
      if (read.status == net::BodyStatus::kGone) co_return;
      head.status = read.httpStatus();
      std::string body = net::sessionErrorBody(read.message, read.code());
      log->delivered[seq] = co_await ex.response->respond(std::move(head), std::move(body));
      co_return;
    }
    const std::string size = R"({"bytes":)" + std::to_string(ex.body.size()) + "}";
    switch (kind) {
      case 'x':
        throw std::runtime_error("handler failure");
      case 'w': {
        auto executor = co_await asio::this_coro::executor;
        asio::steady_timer timer(executor);
        timer.expires_after(end == ClientEnd::kSilent ? std::chrono::milliseconds(2)
                                                      : std::chrono::milliseconds(3'600'000));
        auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec) co_return;  // the caller left: nobody to answer
        std::string body = size;
        log->delivered[seq] = co_await ex.response->respond(std::move(head), std::move(body));
        co_return;
      }
      case 's':
      case 'a':
      case 'h': {
        head.headers.add("content-type", "text/event-stream");
        if (!co_await ex.response->start(std::move(head))) co_return;
        const std::string event = "data: " + size + "\n\n";
        if (!co_await ex.response->write(event)) co_return;
        if (kind == 'a') {
          log->cut = true;
          ex.response->abort();
          co_return;
        }
        if (kind == 'h') {
          log->cut = true;
          co_return;
        }
        if (!co_await ex.response->write(event)) co_return;
        static constexpr std::string_view kDone = "data: [DONE]\n\n";
        if (!co_await ex.response->write(kDone)) co_return;
        log->delivered[seq] = co_await ex.response->finish();
        co_return;
      }
      default: {
        head.status = 200;
        std::string body = size;
        log->delivered[seq] = co_await ex.response->respond(std::move(head), std::move(body));
        co_return;
      }
    }
  };
}

// One connection: the session on one end of a socket pair, the client on the other.
class Connection {
 public:
  // Everything one input leaves for the checks.
  struct Result {
    std::string received;        // every byte the session sent
    bool endedByItself = false;  // kSilent: the session closed before the client gave up
  };

  template <typename Start>
  static Result run(ClientEnd end, std::string_view input, const net::SessionConfig& config,
                    std::shared_ptr<HandlerLog> log, Start start) {
    Connection c(end, input);
    std::shared_ptr<void> slot = std::make_shared<int>(0);
    std::weak_ptr<void> slotAlive = slot;
    net::SessionContext context;
    context.config = std::make_shared<const net::SessionConfig>(config);
    context.slot = std::move(slot);
    // Started from a handler of the io_context, as the listener starts it.
    asio::post(c.io_, [&] {
      start(std::move(c.server_), std::move(context),
            fuzzHandler(std::move(log), end, config.maxRequestBytes));
    });
    c.drive();
    FUZZ_CHECK(slotAlive.expired(),
               "the session is gone (its connection slot released) once nothing is left to run");
    return std::move(c.result_);
  }

 private:
  Connection(ClientEnd end, std::string_view input)
      : end_(end), input_(input), server_(io_), client_(io_) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
      throw std::runtime_error("socketpair failed");
    server_.assign(net::tcp::v4(), fds[0]);
    client_.assign(asio::local::stream_protocol(), fds[1]);
  }

  void drive() {
    read();
    switch (end_) {
      case ClientEnd::kQuietThenEof:
        send(input_, false);
        quiet();
        halfClose();
        break;
      case ClientEnd::kEofAtOnce:
        send(input_, true);
        break;
      case ClientEnd::kSilent: {
        send(input_, false);
        io_.run_for(std::chrono::milliseconds(500));
        result_.endedByItself = io_.stopped();
        FUZZ_CHECK(result_.endedByItself,
                   "a silent client is closed by the session's timeouts (a few ms here)");
        break;
      }
      case ClientEnd::kPieces: {
        // Irregular small pieces over the first 2 KiB, then the rest at once.
        constexpr std::size_t kPattern[] = {1, 7, 2, 64, 3, 19, 5, 300};
        std::size_t at = 0;
        for (std::size_t i = 0; at < input_.size() && at < 2048 && open_; ++i) {
          const std::size_t n = std::min(kPattern[i % std::size(kPattern)], input_.size() - at);
          send(input_.substr(at, n), false);
          at += n;
          quiet();
        }
        if (open_) send(input_.substr(at), false);
        quiet();
        halfClose();
        break;
      }
    }
    io_.restart();
    io_.run_for(std::chrono::seconds(5));
    FUZZ_CHECK(io_.stopped(), "after the client's EOF the session ends within 5 s");
  }

  // Runs what is ready until nothing is: the session has taken what it could
  // and waits for more input or for a timer.
  void quiet() {
    io_.restart();
    while (io_.poll() > 0) {
    }
  }

  void send(std::string_view bytes, bool thenEof) {
    if (bytes.empty()) {
      if (thenEof) halfClose();
      return;
    }
    asio::async_write(client_, asio::buffer(bytes),
                      [this, thenEof](boost::system::error_code, std::size_t) {
                        if (thenEof) halfClose();
                      });
  }

  void halfClose() {
    boost::system::error_code ignored;
    if (open_) client_.shutdown(asio::socket_base::shutdown_send, ignored);
  }

  // Takes everything the session sends; closes when it closes.
  void read() {
    client_.async_read_some(asio::buffer(buffer_),
                            [this](boost::system::error_code ec, std::size_t n) {
                              result_.received.append(buffer_.data(), n);
                              if (!ec) {
                                read();
                                return;
                              }
                              open_ = false;
                              boost::system::error_code ignored;
                              client_.close(ignored);
                            });
  }

  ClientEnd end_;
  std::string_view input_;
  asio::io_context io_;
  net::tcp::socket server_;
  asio::local::stream_protocol::socket client_;
  std::array<char, 16384> buffer_{};
  bool open_ = true;
  Result result_;
};

// Writes to a closed peer must fail with EPIPE, not stop the process.
inline void ignoreSigpipe() {
  std::signal(SIGPIPE, SIG_IGN);
}

}  // namespace relay::fuzz
