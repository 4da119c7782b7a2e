// The MCP relay's send-and-retry loop. Invariant: nothing here writes to the
// caller, so a retry can never duplicate output.
#include "mcp_forward.hpp"

#include <random>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace relay::pipeline {
namespace {

std::uint64_t randomBits() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

// Round robin over the server's instances (per worker).
std::size_t nextInstance(McpServerRoute& server) {
  return server.nextInstance++ % server.instances.size();
}

}  // namespace

bool mcpUnreachable(upstream::FailureKind kind) {
  using upstream::FailureKind;
  return kind == FailureKind::kConnect || kind == FailureKind::kConnectTimeout ||
         kind == FailureKind::kTls || kind == FailureKind::kReset;
}

net::Task<McpSent> sendMcp(McpUpstreams& upstreams, McpServerRoute& server, McpSend send) {
  // The pool may be replaced by a reload while this runs: hold it.
  std::shared_ptr<upstream::ClientPool> pool = upstreams.pool;
  upstream::OutgoingRequest out;
  out.method = send.method;
  out.headers = std::move(send.headers);
  out.body = send.body;

  McpSent sent;
  std::size_t instance = send.pinned ? *send.pinned : nextInstance(server);
  const unsigned maxAttempts = send.retryable ? std::max(1u, send.maxAttempts) : 1u;
  for (unsigned attempt = 0; attempt < maxAttempts; ++attempt) {
    if (attempt > 0) {
      if (send.pinned || server.instances.size() == 1) {
        // Same instance again: give it a moment (full jitter, as the chat path).
        auto delay = upstream::backoffDelay(send.backoff, attempt - 1, randomBits());
        boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, delay);
        auto [ec] = co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
        if (ec) break;  // the caller left
      } else {
        instance = (instance + 1) % server.instances.size();  // another instance, at once
      }
    }
    const McpInstance& target = server.instances[instance];
    // (views on both sides: a std::string result would be a temporary)
    out.path = target.target.basePath.empty() ? std::string_view("/")
                                              : std::string_view(target.target.basePath);
    sent.instance = instance;
    sent.attempts = attempt + 1;
    sent.failure = {};
    sent.response = co_await pool->send(target.poolIndex, out, send.deadlines, sent.failure);
    if (sent.response || !mcpUnreachable(sent.failure.kind)) break;
  }
  co_return sent;
}

}  // namespace relay::pipeline
