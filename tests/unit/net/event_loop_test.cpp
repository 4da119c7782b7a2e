// A worker's event loop with server.busy_poll_us (src/net/event_loop.hpp):
// it runs work that arrives while it polls, sleeps once the window has
// passed by its clock since the first empty poll, starts a fresh window
// after work, and without a window is io_context::run().
#include "event_loop.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <gtest/gtest.h>

namespace relay::net {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;

// A clock that moves one microsecond per reading, and counts them.
struct StepClock {
  std::atomic<long>* reads;
  TimePoint operator()() const {
    return TimePoint(std::chrono::microseconds(reads->fetch_add(1) + 1));
  }
};

TEST(EventLoop, WithoutAWindowItIsRunAndStopsWhenStopped) {
  asio::io_context ctx(1);
  auto guard = asio::make_work_guard(ctx);
  int ran = 0;
  asio::post(ctx, [&] { ++ran; });
  asio::post(ctx, [&] { ctx.stop(); });
  std::atomic<long> reads{0};
  runEventLoop(ctx, 0us, StepClock{&reads});
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(reads.load(), 0);  // no clock: plain run()
}

// The clock never moves: the loop polls until work arrives from another
// thread, and runs it. A loop that slept instead would still run it; one
// that neither polled nor slept would hang (the test's timeout).
TEST(EventLoop, WorkArrivingWhileItPollsRuns) {
  asio::io_context ctx(1);
  auto guard = asio::make_work_guard(ctx);
  std::atomic<long> reads{0};
  bool ran = false;
  std::thread poster([&] {
    while (reads.load() < 100)
      std::this_thread::yield();  // it is polling
    asio::post(ctx, [&] {
      ran = true;
      ctx.stop();
    });
  });
  runEventLoop(ctx, 10us, [&] {
    reads.fetch_add(1);
    return TimePoint{};  // never advances: the window never passes
  });
  poster.join();
  EXPECT_TRUE(ran);
  EXPECT_GE(reads.load(), 100);
}

// The clock moves 1 µs per reading and the window is 10 µs: the first
// empty poll starts the window (reading 1), and the reading 11 µs later
// (reading 11) ends it; then the loop sleeps and reads the clock no more
// until work comes. Work posted after the 11th reading wakes it; it stops
// the loop, so there are exactly 11 readings. A loop that kept polling past
// its window would read on while the poster waits to see the count settle
// — the poster posts only once the 11th reading is in, and a loop that
// polled on would make more before it ran the work (it polls the clock
// between polls of the queue), so the count checks the window.
TEST(EventLoop, SleepsWhenTheWindowHasPassedByItsClock) {
  asio::io_context ctx(1);
  auto guard = asio::make_work_guard(ctx);
  std::atomic<long> reads{0};
  std::atomic<bool> stopRequested{false};
  std::thread poster([&] {
    while (reads.load() < 11)
      std::this_thread::yield();
    asio::post(ctx, [&] { ctx.stop(); });
    stopRequested = true;
  });
  runEventLoop(ctx, 10us, StepClock{&reads});
  poster.join();
  EXPECT_TRUE(stopRequested.load());
  EXPECT_EQ(reads.load(), 11);
}

// Work resets the window: handlers that each post the next one keep the
// loop busy without a single empty poll, so the clock is not read until the
// chain ends; then one window (11 readings) and the sleep.
TEST(EventLoop, WorkStartsAFreshWindow) {
  asio::io_context ctx(1);
  auto guard = asio::make_work_guard(ctx);
  std::atomic<long> reads{0};
  int left = 1000;
  long readsDuringChain = -1;
  std::function<void()> next = [&] {
    if (--left > 0) {
      asio::post(ctx, next);
    } else {
      readsDuringChain = reads.load();
    }
  };
  asio::post(ctx, next);
  std::thread poster([&] {
    while (reads.load() < 11)
      std::this_thread::yield();
    asio::post(ctx, [&] { ctx.stop(); });
  });
  runEventLoop(ctx, 10us, StepClock{&reads});
  poster.join();
  EXPECT_EQ(left, 0);
  EXPECT_EQ(readsDuringChain, 0);
  EXPECT_EQ(reads.load(), 11);
}

}  // namespace
}  // namespace relay::net
