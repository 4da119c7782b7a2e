// One worker's connection to Redis (private to cluster/): pipelined, on the
// worker's own event loop, so nothing here locks.
//
//  - call(): one command, its reply or an error by cluster.redis_timeout_ms.
//    Replies come back in order (RESP is FIFO), so a caller that gave up
//    leaves its slot in the queue and the late reply is dropped.
//  - send(): fire and forget, for settlements. A settlement made while Redis
//    is unreachable waits in a bounded backlog (kBacklogLimit per worker)
//    and is replayed, in order, when the connection is back; one in flight
//    when a connection drops is replayed too (the scripts apply each lease
//    id once, so a replay never charges twice).
//  - Breaker: kBreakerFailures failures in a row (timeouts, error replies)
//    close the connection (only a reply in time to a waiting call ends a
//    run: late replies do not, so a Redis slower than the timeout trips it); while it is down or
//    reconnecting, calls fail at once (RedisError::kDown) instead of each waiting for a timeout.
//    Reconnects back off from 50 ms to 2 s with jitter, so shared state is
//    global again within about 2 s of Redis returning.
//  - Connect: TCP (or TLS for rediss://, verified against the system CAs or
//    SSL_CERT_FILE, with SNI), AUTH, SELECT, SCRIPT LOAD of every script; the
//    connection is ready only when all succeeded.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>

#include "relay/cluster/resp.hpp"
#include "relay/common/shared_state_stats.hpp"
#include "relay/config/config.hpp"
#include "relay/net/exchange.hpp"
#include "scripts.hpp"

namespace relay::cluster {

enum class RedisError : std::uint8_t { kNone, kDown, kTimeout, kConnection, kReply, kProtocol };

struct RedisReply {
  RespValue value;
  RedisError error = RedisError::kNone;
  bool ok() const { return error == RedisError::kNone; }
};

class RedisLink : public std::enable_shared_from_this<RedisLink> {
 public:
  static constexpr std::size_t kBacklogLimit = 16384;
  static constexpr int kBreakerFailures = 3;

  using OnReply = std::function<void(const RedisReply&)>;

  RedisLink(boost::asio::io_context& context, config::RedisUrl url,
            std::chrono::milliseconds timeout, std::vector<const Script*> scripts);
  ~RedisLink();

  // Starts connecting (and reconnecting) on the context; call once.
  // `onReady` runs each time a connection becomes ready, after the backlog
  // was queued (what it sends goes after the replayed settlements).
  void start(std::function<void()> onReady = {});
  // Closes the connection for good; pending calls fail.
  void stop();

  bool ready() const { return state_ == State::kReady; }
  // Commands sent and not answered yet, and settlements waiting for a
  // connection (readable from any thread: the drain waits for settlements
  // to land before the loops stop).
  std::size_t unanswered() const { return unanswered_.load(std::memory_order_relaxed); }
  // The SHA1 that EVALSHA names `script` by (lowercase hex).
  const std::string& sha(const Script& script) const;
  const config::RedisUrl& url() const { return url_; }

  // Sends one encoded command (resp.hpp appendCommand) and waits for its
  // reply, at most the configured timeout.
  net::Task<RedisReply> call(std::string command);
  // Sends one command without waiting. `keep`: if it cannot be sent now, or
  // its connection drops before the reply, it is sent again later (bounded).
  // `onReply` runs once with the final outcome: the reply, or kDown when the
  // command was dropped from a full backlog (or not kept).
  void send(std::string command, bool keep, OnReply onReply = {});

 private:
  enum class State { kIdle, kConnecting, kReady, kStopped };
  struct Waiter;
  struct Pending {
    std::string command;  // kept for replay (keep only)
    bool keep = false;
    bool resent = false;  // sent again after NOSCRIPT (once)
    Waiter* waiter = nullptr;
    OnReply onReply;
  };

  net::Task<void> run();
  net::Task<bool> connect();
  net::Task<void> readLoop(std::uint64_t generation);
  net::Task<void> writeLoop(std::uint64_t generation);
  void enqueue(Pending pending, std::string_view command);
  void kickWriter();
  void complete(RedisReply reply);
  void failure(RedisError why);  // counts toward the breaker
  void drop(RedisError why, std::string_view detail);
  void queueBacklog(Pending pending);
  void countUnanswered();  // unanswered_ from pending_ and backlog_
  void loadScripts();      // SCRIPT LOAD of each, unless a load is in flight
  void setState(State s);

  boost::asio::io_context& context_;
  config::RedisUrl url_;
  std::chrono::milliseconds timeout_;
  std::vector<const Script*> scripts_;
  std::vector<std::string> shas_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::shared_ptr<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> stream_;
  boost::asio::steady_timer backoff_;
  State state_ = State::kIdle;
  std::uint64_t generation_ = 0;  // of the current connection
  std::deque<Pending> pending_;   // sent (or queued to send), awaiting replies
  std::deque<Pending> backlog_;   // settlements waiting for a connection (no waiter)
  std::string out_;               // encoded, not yet written
  std::string in_;                // read, not yet parsed
  bool writing_ = false;
  int failures_ = 0;  // in a row
  bool loggedDown_ = false;
  bool loadingScripts_ = false;  // SCRIPT LOADs sent after NOSCRIPT, not all answered
  // When the last of them was answered (on this connection).
  std::optional<std::chrono::steady_clock::time_point> scriptsLoadedAt_;
  // A NOSCRIPT within this of a load's answer: the load did not stick.
  static constexpr std::chrono::seconds kLoadSticks{1};
  std::function<void()> onReady_;
  std::atomic<std::size_t> unanswered_{0};
};

}  // namespace relay::cluster
