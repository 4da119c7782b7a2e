#include "redis_link.hpp"

#include <algorithm>
#include <random>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include "relay/common/hex.hpp"

namespace relay::cluster {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Stream = asio::ssl::stream<tcp::socket>;
using std::chrono::milliseconds;

namespace {

std::string sha1Hex(std::string_view text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), md, &len, EVP_sha1(), nullptr);
  return toHexString(md, len);
}

RedisErrorKind statKind(RedisError e) {
  switch (e) {
    case RedisError::kTimeout:
      return RedisErrorKind::kTimeout;
    case RedisError::kReply:
      return RedisErrorKind::kReply;
    case RedisError::kProtocol:
      return RedisErrorKind::kProtocol;
    case RedisError::kDown:
      return RedisErrorKind::kDown;
    default:
      return RedisErrorKind::kConnection;
  }
}

// One read of whatever has arrived, through TLS or not.
net::Task<std::size_t> readSome(Stream& stream, bool tls, asio::mutable_buffer buf,
                                boost::system::error_code& ec) {
  std::size_t n = 0;
  if (tls) {
    n = co_await stream.async_read_some(buf, asio::redirect_error(asio::use_awaitable, ec));
  } else {
    n = co_await stream.next_layer().async_read_some(buf,
                                                     asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return n;
}

// Writes all of `buf`, through TLS or not.
net::Task<void> writeAll(Stream& stream, bool tls, asio::const_buffer buf,
                         boost::system::error_code& ec) {
  if (tls) {
    co_await asio::async_write(stream, buf, asio::redirect_error(asio::use_awaitable, ec));
  } else {
    co_await asio::async_write(stream.next_layer(), buf,
                               asio::redirect_error(asio::use_awaitable, ec));
  }
}

// The commands a new connection sends before anything else, pipelined: AUTH,
// SELECT and SCRIPT LOAD of every script. `what` names each one, in order,
// for the message of a refused one.
std::string handshakeCommands(const config::RedisUrl& url,
                              const std::vector<const Script*>& scripts,
                              std::vector<std::string_view>& what) {
  std::string hello;
  if (!url.password.empty()) {
    if (url.user.empty()) {
      appendCommand(hello, {"AUTH", url.password});
    } else {
      appendCommand(hello, {"AUTH", url.user, url.password});
    }
    what.push_back("AUTH");
  }
  if (url.db != 0) {
    appendCommand(hello, {"SELECT", std::to_string(url.db)});
    what.push_back("SELECT");
  }
  for (const Script* s : scripts) {
    appendCommand(hello, {"SCRIPT", "LOAD", s->source});
    what.push_back("SCRIPT LOAD");
  }
  return hello;
}

// Why a connection's handshake failed: the step and what was said.
struct StepFailure {
  std::string_view step;
  std::string detail;
};

// Reads one reply per command of `what` (bytes beyond them stay in `in`);
// every reply must be OK. `expired` is set when the attempt's deadline passed.
net::Task<std::optional<StepFailure>> readHandshakeReplies(
    Stream& stream, bool tls, std::string& in, const std::vector<std::string_view>& what,
    const bool& expired) {
  std::size_t answered = 0;
  char buf[4096];
  while (answered < what.size()) {
    RespValue v;
    std::size_t used = 0;
    std::string error;
    RespStatus s = parseReply(in, v, used, error);
    if (s == RespStatus::kBad) co_return StepFailure{"reply", error};
    if (s == RespStatus::kOk) {
      in.erase(0, used);
      if (v.isError()) {
        // Redis's own text (e.g. "WRONGPASS invalid username-password pair"): never the password.
        co_return StepFailure{what[answered], v.text.substr(0, 200)};
      }
      ++answered;
      continue;
    }
    boost::system::error_code ec;
    const asio::mutable_buffer into = asio::buffer(buf);  // named: no temporary in co_await
    const std::size_t n = co_await readSome(stream, tls, into, ec);
    if (ec || expired) co_return StepFailure{"read", ec.message()};
    in.append(buf, n);
  }
  co_return std::nullopt;
}

}  // namespace

struct RedisLink::Waiter {
  explicit Waiter(const asio::any_io_executor& ex) : timer(ex) {}
  ~Waiter() {
    if (pending) pending->waiter = nullptr;
  }
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;
  asio::steady_timer timer;
  Pending* pending = nullptr;
  std::optional<RedisReply> reply;
};

RedisLink::RedisLink(asio::io_context& context, config::RedisUrl url, milliseconds timeout,
                     std::vector<const Script*> scripts)
    : context_(context),
      url_(std::move(url)),
      timeout_(timeout),
      scripts_(std::move(scripts)),
      tls_(std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client)),
      backoff_(context) {
  for (const Script* s : scripts_)
    shas_.push_back(sha1Hex(s->source));
  if (url_.tls) {
    tls_->set_verify_mode(asio::ssl::verify_peer);
    tls_->set_default_verify_paths();  // honours SSL_CERT_FILE / SSL_CERT_DIR
  }
  sharedStateStats().workers.fetch_add(1, std::memory_order_relaxed);
}

RedisLink::~RedisLink() {
  if (state_ == State::kReady) sharedStateStats().connections.fetch_sub(1);
  sharedStateStats().workers.fetch_sub(1, std::memory_order_relaxed);
}

const std::string& RedisLink::sha(const Script& script) const {
  for (std::size_t i = 0; i < scripts_.size(); ++i)
    if (scripts_[i] == &script) return shas_[i];
  static const std::string kNone;
  return kNone;
}

void RedisLink::start(std::function<void()> onReady) {
  onReady_ = std::move(onReady);
  asio::co_spawn(
      context_, [self = shared_from_this()]() -> net::Task<void> { co_await self->run(); },
      asio::detached);
}

void RedisLink::stop() {
  if (state_ == State::kStopped) return;
  drop(RedisError::kConnection, "the gateway is stopping");
  setState(State::kStopped);
  backoff_.cancel();
}

void RedisLink::setState(State s) {
  if (s == state_) return;
  if (state_ == State::kReady) sharedStateStats().connections.fetch_sub(1);
  if (s == State::kReady) sharedStateStats().connections.fetch_add(1);
  state_ = s;
}

net::Task<void> RedisLink::run() {
  std::mt19937 jitter(std::random_device{}());
  int attempt = 0;
  while (state_ != State::kStopped) {
    setState(State::kConnecting);
    const bool ok = co_await connect();
    if (state_ == State::kStopped) break;
    if (ok) {
      if (loggedDown_) {
        spdlog::info("shared state: connected to {} again; limits and budgets are shared again",
                     url_.display());
      } else {
        spdlog::info("shared state: connected to {}", url_.display());
      }
      loggedDown_ = false;
      attempt = 0;
      failures_ = 0;
      setState(State::kReady);
      const std::uint64_t generation = generation_;
      // Settlements made while Redis was away, in the order they were made.
      std::deque<Pending> replay;
      replay.swap(backlog_);
      sharedStateStats().settlementsQueued.fetch_sub(replay.size(), std::memory_order_relaxed);
      for (Pending& p : replay) {
        std::string command = p.command;
        enqueue(std::move(p), command);
      }
      if (onReady_) onReady_();
      co_await readLoop(generation);
      if (state_ == State::kStopped) break;
    }
    const milliseconds cap = milliseconds(50) * (1 << std::min(attempt, 6));
    const milliseconds delay = std::min(cap, milliseconds(2000));
    std::uniform_int_distribution<long> spread(delay.count() / 2, delay.count());
    ++attempt;
    backoff_.expires_after(milliseconds(spread(jitter)));
    boost::system::error_code ec;
    co_await backoff_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

net::Task<bool> RedisLink::connect() {
  const std::uint64_t generation = ++generation_;
  auto stream = std::make_shared<Stream>(context_, *tls_);
  stream_ = stream;
  in_.clear();

  // One deadline over resolve, connect, TLS and the handshake commands.
  struct Attempt {
    explicit Attempt(asio::io_context& c) : resolver(c), timer(c) {}
    tcp::resolver resolver;
    asio::steady_timer timer;
    bool expired = false;
  };
  auto attempt = std::make_shared<Attempt>(context_);
  attempt->timer.expires_after(std::max(milliseconds(1000), timeout_ * 10));
  attempt->timer.async_wait([attempt, stream](boost::system::error_code ec) {
    if (ec) return;
    attempt->expired = true;
    attempt->resolver.cancel();
    boost::system::error_code ignored;
    stream->lowest_layer().close(ignored);
  });
  struct CancelOnExit {
    std::shared_ptr<Attempt> a;
    ~CancelOnExit() { a->timer.cancel(); }
  } cancelOnExit{attempt};

  auto fail = [&](std::string_view what, const std::string& detail) {
    sharedStateStats().error(RedisErrorKind::kConnection);
    const std::string why = attempt->expired ? std::string("timed out") : detail;
    if (!loggedDown_) {
      spdlog::warn("shared state: cannot reach {} ({}: {}); retrying with backoff", url_.display(),
                   what, why);
      loggedDown_ = true;
    } else {
      spdlog::debug("shared state: {} still unreachable ({}: {})", url_.display(), what, why);
    }
    boost::system::error_code ignored;
    stream->lowest_layer().close(ignored);
    return false;
  };

  boost::system::error_code ec;
  auto endpoints = co_await attempt->resolver.async_resolve(
      url_.host, std::to_string(url_.port), asio::redirect_error(asio::use_awaitable, ec));
  if (ec || attempt->expired) co_return fail("resolve", ec.message());
  co_await asio::async_connect(stream->lowest_layer(), endpoints,
                               asio::redirect_error(asio::use_awaitable, ec));
  if (ec || attempt->expired) co_return fail("connect", ec.message());
  stream->lowest_layer().set_option(tcp::no_delay(true), ec);
  if (url_.tls) {
    SSL_set_tlsext_host_name(stream->native_handle(), url_.host.c_str());
    stream->set_verify_callback(asio::ssl::host_name_verification(url_.host));
    co_await stream->async_handshake(asio::ssl::stream_base::client,
                                     asio::redirect_error(asio::use_awaitable, ec));
    if (ec || attempt->expired) co_return fail("TLS handshake", ec.message());
  }

  // AUTH, SELECT and the scripts, pipelined; every reply must be OK.
  std::vector<std::string_view> what;
  const std::string hello = handshakeCommands(url_, scripts_, what);
  const asio::const_buffer helloBytes = asio::buffer(hello);  // named: no temporary in co_await
  co_await writeAll(*stream, url_.tls, helloBytes, ec);
  if (ec || attempt->expired) co_return fail("write", ec.message());
  std::optional<StepFailure> refused =
      co_await readHandshakeReplies(*stream, url_.tls, in_, what, attempt->expired);
  if (refused) co_return fail(refused->step, refused->detail);
  co_return generation == generation_;
}

net::Task<void> RedisLink::readLoop(std::uint64_t generation) {
  std::shared_ptr<Stream> stream = stream_;
  char buf[16 * 1024];
  while (generation == generation_) {
    boost::system::error_code ec;
    const asio::mutable_buffer into = asio::buffer(buf);  // named: no temporary in co_await
    const std::size_t n = co_await readSome(*stream, url_.tls, into, ec);
    if (generation != generation_) co_return;
    if (ec) {
      drop(RedisError::kConnection, ec == asio::error::eof ? "closed by Redis" : ec.message());
      co_return;
    }
    in_.append(buf, n);
    std::size_t offset = 0;
    while (generation == generation_) {
      RespValue v;
      std::size_t used = 0;
      std::string error;
      RespStatus s = parseReply(std::string_view(in_).substr(offset), v, used, error);
      if (s == RespStatus::kNeedMore) break;
      if (s == RespStatus::kBad) {
        drop(RedisError::kProtocol, error);
        co_return;
      }
      offset += used;
      RedisReply reply;
      reply.error = v.isError() ? RedisError::kReply : RedisError::kNone;
      reply.value = std::move(v);
      complete(std::move(reply));
    }
    if (generation != generation_) co_return;
    in_.erase(0, offset);
  }
}

void RedisLink::complete(RedisReply reply) {
  if (pending_.empty()) {
    drop(RedisError::kProtocol, "a reply to no command");
    return;
  }
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  if (p.waiter) p.waiter->pending = nullptr;
  bool failed = false;  // counts toward the breaker
  if (reply.error == RedisError::kReply) {
    sharedStateStats().error(RedisErrorKind::kReply);
    spdlog::debug("shared state: Redis answered an error: {}", reply.value.text.substr(0, 200));
    if (reply.value.text.starts_with("NOSCRIPT")) {
      // Someone flushed the scripts, or a failover reached a Redis without
      // them: Redis answers, so this is no failure of it (every command in
      // flight says the same, and three would trip the breaker). The
      // scripts are loaded again, once for however many say so (FIFO:
      // before what follows them). But a NOSCRIPT soon after a load was
      // answered, or to a settlement sent again for it, says the load did
      // not stick (a proxy that sends the load and the call to different
      // servers): that is a failure, and three trip the breaker.
      failed = p.resent || (!loadingScripts_ && scriptsLoadedAt_ &&
                            std::chrono::steady_clock::now() - *scriptsLoadedAt_ < kLoadSticks);
      loadScripts();
      // A settlement is sent again after them, once: its lease would
      // otherwise hold the slot until it expires and its cost would never
      // be charged. (The scripts apply a lease id once.)
      if (p.keep && !p.resent) {
        p.resent = true;
        std::string command = p.command;
        enqueue(std::move(p), command);
        if (failed) failure(RedisError::kReply);
        return;
      }
      // Sent again and refused again: kept for the next connection, whose
      // handshake loads the scripts (the breaker is on its way to it).
      if (p.keep) {
        queueBacklog(std::move(p));
        failure(RedisError::kReply);
        return;
      }
    } else {
      failed = true;
    }
  } else if (p.waiter) {
    // Only an answer in time to a caller still waiting ends a run of
    // failures: a late one (its caller timed out) or a settlement's says
    // nothing of how long Redis takes, and a Redis slower than the timeout
    // must trip the breaker rather than make every caller wait for it.
    failures_ = 0;
  }
  if (p.waiter) {
    p.waiter->reply = reply;
    p.waiter->timer.cancel();
  } else if (p.onReply) {
    p.onReply(reply);
  }
  countUnanswered();
  if (failed) failure(RedisError::kReply);
}

void RedisLink::loadScripts() {
  if (loadingScripts_) return;
  loadingScripts_ = true;
  for (std::size_t i = 0; i < scripts_.size(); ++i) {
    std::string load;
    appendCommand(load, {"SCRIPT", "LOAD", scripts_[i]->source});
    OnReply loaded;
    if (i + 1 == scripts_.size()) {
      loaded = [this](const RedisReply&) {
        loadingScripts_ = false;
        scriptsLoadedAt_ = std::chrono::steady_clock::now();
      };
    }
    send(std::move(load), false, std::move(loaded));
  }
}

void RedisLink::failure(RedisError why) {
  if (++failures_ >= kBreakerFailures) {
    drop(why, std::to_string(failures_) + " calls in a row failed (" +
                  std::string(redisErrorName(statKind(why))) + ")");
  }
}

void RedisLink::drop(RedisError why, std::string_view detail) {
  if (state_ == State::kStopped) return;
  const bool wasReady = state_ == State::kReady;
  ++generation_;
  if (stream_) {
    boost::system::error_code ignored;
    stream_->lowest_layer().close(ignored);
  }
  writing_ = false;
  out_.clear();
  in_.clear();
  failures_ = 0;
  loadingScripts_ = false;  // a new connection loads them in its handshake
  scriptsLoadedAt_.reset();
  if (wasReady) {
    sharedStateStats().error(statKind(why));
    spdlog::warn("shared state: lost {}: {}; deciding on this replica's own state until it is back",
                 url_.display(), detail);
    loggedDown_ = true;
    setState(State::kConnecting);
  }
  // Settlements whose replies never came are sent again (in order, before
  // those queued since); callers waiting are told at once.
  std::deque<Pending> pending;
  pending.swap(pending_);
  std::deque<Pending> replay;
  for (Pending& p : pending) {
    if (p.waiter) {
      p.waiter->pending = nullptr;
      p.waiter->reply = RedisReply{{}, RedisError::kConnection};
      p.waiter->timer.cancel();
    }
    if (p.keep) {
      p.waiter = nullptr;
      replay.push_back(std::move(p));
    }
  }
  for (auto it = replay.rbegin(); it != replay.rend(); ++it) {
    backlog_.push_front(std::move(*it));
    sharedStateStats().settlementsQueued.fetch_add(1, std::memory_order_relaxed);
  }
  while (backlog_.size() > kBacklogLimit) {
    Pending lost = std::move(backlog_.front());
    backlog_.pop_front();
    sharedStateStats().settlementsQueued.fetch_sub(1, std::memory_order_relaxed);
    sharedStateStats().settlementsDropped.fetch_add(1, std::memory_order_relaxed);
    if (lost.onReply) lost.onReply(RedisReply{{}, RedisError::kDown});
  }
  countUnanswered();
}

void RedisLink::queueBacklog(Pending pending) {
  if (state_ == State::kStopped) return;
  if (backlog_.size() >= kBacklogLimit) {
    Pending lost = std::move(backlog_.front());
    backlog_.pop_front();
    sharedStateStats().settlementsDropped.fetch_add(1, std::memory_order_relaxed);
    if (lost.onReply) lost.onReply(RedisReply{{}, RedisError::kDown});
  } else {
    sharedStateStats().settlementsQueued.fetch_add(1, std::memory_order_relaxed);
  }
  backlog_.push_back(std::move(pending));
  countUnanswered();
}

void RedisLink::countUnanswered() {
  unanswered_.store(pending_.size() + backlog_.size(), std::memory_order_relaxed);
}

void RedisLink::enqueue(Pending pending, std::string_view command) {
  pending_.push_back(std::move(pending));
  countUnanswered();
  out_ += command;
  kickWriter();
}

void RedisLink::kickWriter() {
  if (writing_ || state_ != State::kReady || out_.empty()) return;
  writing_ = true;
  asio::co_spawn(
      context_,
      [self = shared_from_this(), generation = generation_]() -> net::Task<void> {
        co_await self->writeLoop(generation);
      },
      asio::detached);
}

net::Task<void> RedisLink::writeLoop(std::uint64_t generation) {
  std::shared_ptr<Stream> stream = stream_;
  std::string buf;
  while (generation == generation_ && !out_.empty()) {
    buf.clear();
    buf.swap(out_);
    boost::system::error_code ec;
    const asio::const_buffer bytes = asio::buffer(buf);  // named: no temporary in co_await
    co_await writeAll(*stream, url_.tls, bytes, ec);
    if (generation != generation_) co_return;
    if (ec) {
      drop(RedisError::kConnection, ec.message());
      co_return;
    }
  }
  if (generation == generation_) writing_ = false;
}

net::Task<RedisReply> RedisLink::call(std::string command) {
  if (state_ != State::kReady) {
    sharedStateStats().error(RedisErrorKind::kDown);
    co_return RedisReply{{}, RedisError::kDown};
  }
  Waiter waiter(co_await asio::this_coro::executor);
  waiter.timer.expires_after(timeout_);
  Pending p;
  p.waiter = &waiter;
  enqueue(std::move(p), command);
  waiter.pending = &pending_.back();
  const auto t0 = std::chrono::steady_clock::now();
  boost::system::error_code ec;
  co_await waiter.timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (waiter.reply) {
    if (waiter.reply->error == RedisError::kNone)
      sharedStateStats().observe(std::chrono::steady_clock::now() - t0);
    co_return std::move(*waiter.reply);
  }
  if (waiter.pending) {
    waiter.pending->waiter = nullptr;  // its late reply is dropped
    waiter.pending = nullptr;
  }
  if (ec == asio::error::operation_aborted) {
    co_return RedisReply{{}, RedisError::kConnection};  // our caller was cancelled
  }
  sharedStateStats().error(RedisErrorKind::kTimeout);
  failure(RedisError::kTimeout);
  co_return RedisReply{{}, RedisError::kTimeout};
}

void RedisLink::send(std::string command, bool keep, OnReply onReply) {
  Pending p;
  p.keep = keep;
  p.onReply = std::move(onReply);
  if (state_ != State::kReady) {
    if (keep) {
      p.command = std::move(command);
      queueBacklog(std::move(p));
    }
    return;
  }
  if (keep) p.command = command;
  enqueue(std::move(p), command);
}

}  // namespace relay::cluster
