#include "pause.hpp"

#include <chrono>
#include <optional>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace relay::mock {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kPollInterval{100};

// nullopt deadline = forever.
net::Task<bool> waitUntil(net::ResponseSink& sink, std::optional<Clock::time_point> deadline) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  while (!sink.clientGone()) {
    Clock::time_point now = Clock::now();
    if (deadline && now >= *deadline) co_return true;
    Clock::time_point wake = now + kPollInterval;
    timer.expires_at(deadline && *deadline < wake ? *deadline : wake);
    auto [ec] = co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    if (ec) co_return false;  // operation_aborted: the session cancelled us
  }
  co_return false;
}

}  // namespace

net::Task<bool> pauseFor(net::ResponseSink& sink, std::uint32_t ms) {
  if (ms == 0) co_return !sink.clientGone();
  co_return co_await waitUntil(sink, Clock::now() + std::chrono::milliseconds(ms));
}

net::Task<void> waitForClientGone(net::ResponseSink& sink) {
  co_await waitUntil(sink, std::nullopt);
}

}  // namespace relay::mock
