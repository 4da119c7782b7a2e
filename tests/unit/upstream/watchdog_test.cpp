// The upstream deadline watchdogs (src/upstream/connection.hpp): one timer
// per io_context for every armed watchdog, deadlines that move later by a
// store, and a context that is left with no work once nothing is armed.
#include <chrono>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "connection.hpp"

namespace relay::upstream {
namespace {

using namespace std::chrono_literals;

struct Watched {
  explicit Watched(asio::io_context& ioc) : socket(ioc), dog(ioc.get_executor()) {
    socket.open(tcp::v4());
    dog.watch(&socket);
  }
  tcp::socket socket;
  Watchdog dog;
};

WatchdogList& listOf(asio::io_context& ioc) {
  return asio::use_service<WatchdogList>(ioc);
}

// Runs handlers until `done()` holds (or the context runs out of work).
template <class Pred>
void runUntil(asio::io_context& ioc, Pred done) {
  while (!done() && ioc.run_one() > 0) {
  }
}

TEST(Watchdog, EachDeadlineClosesItsOwnSocketAndNamesItsKind) {
  asio::io_context ioc;
  Watched first(ioc), second(ioc);
  const auto now = Clock::now();
  first.dog.set(now + 40ms, FailureKind::kIdleTimeout);
  second.dog.set(now + 10ms, FailureKind::kFirstByteTimeout);
  EXPECT_EQ(listOf(ioc).armed(), 2u);

  runUntil(ioc, [&] { return !second.socket.is_open(); });
  EXPECT_EQ(second.dog.fired(), FailureKind::kFirstByteTimeout);
  EXPECT_GE(Clock::now(), now + 10ms);
  EXPECT_TRUE(first.socket.is_open()) << "a later deadline fired with the earlier one";
  EXPECT_EQ(first.dog.fired(), FailureKind::kNone);

  runUntil(ioc, [&] { return !first.socket.is_open(); });
  EXPECT_EQ(first.dog.fired(), FailureKind::kIdleTimeout);
  EXPECT_GE(Clock::now(), now + 40ms);
  EXPECT_EQ(listOf(ioc).armed(), 0u);
  ioc.run();  // nothing left: returns
  EXPECT_TRUE(ioc.stopped());
}

TEST(Watchdog, ADeadlineMovedLaterDoesNotFireAtTheEarlierOne) {
  asio::io_context ioc;
  Watched moved(ioc), witness(ioc);
  const auto now = Clock::now();
  moved.dog.set(now + 5ms, FailureKind::kFirstByteTimeout);
  moved.dog.set(now + 60ms, FailureKind::kIdleTimeout);  // a read came: later, and a store
  witness.dog.set(now + 25ms, FailureKind::kTotalTimeout);

  // The timer still wakes at 5 ms, finds nothing due, and sleeps to 25 ms.
  runUntil(ioc, [&] { return !witness.socket.is_open(); });
  EXPECT_TRUE(moved.socket.is_open()) << "fired at the deadline it had before it moved";
  runUntil(ioc, [&] { return !moved.socket.is_open(); });
  EXPECT_EQ(moved.dog.fired(), FailureKind::kIdleTimeout);
  EXPECT_GE(Clock::now(), now + 60ms);
}

TEST(Watchdog, ADeadlineMovedEarlierThanTheTimerMovesTheTimer) {
  asio::io_context ioc;
  Watched late(ioc), early(ioc);
  const auto now = Clock::now();
  late.dog.set(now + 10s, FailureKind::kTotalTimeout);
  early.dog.set(now + 10s, FailureKind::kTotalTimeout);
  early.dog.set(now + 5ms, FailureKind::kConnectTimeout);

  runUntil(ioc, [&] { return !early.socket.is_open(); });
  EXPECT_EQ(early.dog.fired(), FailureKind::kConnectTimeout);
  EXPECT_LT(Clock::now(), now + 10s);
  EXPECT_TRUE(late.socket.is_open());
  EXPECT_EQ(listOf(ioc).armed(), 1u);
}

TEST(Watchdog, DisarmedOrDestroyedWatchdogsLeaveTheContextWithoutWork) {
  asio::io_context ioc;
  auto gone = std::make_unique<Watched>(ioc);
  Watched disarmed(ioc);
  gone->dog.set(Clock::now() + 1h, FailureKind::kTotalTimeout);
  disarmed.dog.set(Clock::now() + 1h, FailureKind::kTotalTimeout);
  EXPECT_EQ(listOf(ioc).armed(), 2u);

  gone.reset();
  EXPECT_EQ(listOf(ioc).armed(), 1u);
  disarmed.dog.disarm();
  EXPECT_EQ(listOf(ioc).armed(), 0u);
  // An hour-long wait left pending would keep run() from returning.
  ioc.run();
  EXPECT_TRUE(ioc.stopped());
  EXPECT_TRUE(disarmed.socket.is_open());
  EXPECT_EQ(disarmed.dog.fired(), FailureKind::kNone);

  // A disarmed watchdog arms again on its next deadline.
  disarmed.dog.watch(&disarmed.socket);
  ioc.restart();
  disarmed.dog.set(Clock::now() + 1ms, FailureKind::kIdleTimeout);
  ioc.run();
  EXPECT_FALSE(disarmed.socket.is_open());
  EXPECT_EQ(disarmed.dog.fired(), FailureKind::kIdleTimeout);
}

TEST(Watchdog, AFiredWatchdogStaysFiredAndUnarmed) {
  asio::io_context ioc;
  Watched w(ioc);
  w.dog.set(Clock::now(), FailureKind::kIdleTimeout);
  ioc.run();
  EXPECT_EQ(w.dog.fired(), FailureKind::kIdleTimeout);
  w.dog.set(Clock::now() + 1h, FailureKind::kTotalTimeout);  // its socket is gone: nothing to arm
  EXPECT_EQ(listOf(ioc).armed(), 0u);
  EXPECT_EQ(w.dog.fired(), FailureKind::kIdleTimeout);
}

TEST(Watchdog, ManyWatchdogsEachFireOnceAndTheListEmpties) {
  asio::io_context ioc;
  std::vector<std::unique_ptr<Watched>> all;
  const auto now = Clock::now();
  for (int i = 0; i < 500; ++i) {
    all.push_back(std::make_unique<Watched>(ioc));
    // Deadlines out of order, some moved later, some earlier.
    all.back()->dog.set(now + std::chrono::milliseconds((i * 7) % 30), FailureKind::kIdleTimeout);
    if (i % 3 == 0) all.back()->dog.set(now + 35ms, FailureKind::kTotalTimeout);
    if (i % 5 == 0) all.back()->dog.set(now + 1ms, FailureKind::kFirstByteTimeout);
  }
  // One in fifteen is done before its deadline.
  for (int i = 0; i < 500; i += 15)
    all[i]->dog.disarm();
  ioc.run();
  EXPECT_GE(Clock::now(), now + 35ms);
  EXPECT_EQ(listOf(ioc).armed(), 0u);
  for (int i = 0; i < 500; ++i) {
    const FailureKind want = i % 15 == 0  ? FailureKind::kNone
                             : i % 5 == 0 ? FailureKind::kFirstByteTimeout
                             : i % 3 == 0 ? FailureKind::kTotalTimeout
                                          : FailureKind::kIdleTimeout;
    EXPECT_EQ(all[i]->dog.fired(), want) << "watchdog " << i;
    EXPECT_EQ(all[i]->socket.is_open(), want == FailureKind::kNone) << "watchdog " << i;
  }
}

}  // namespace
}  // namespace relay::upstream
