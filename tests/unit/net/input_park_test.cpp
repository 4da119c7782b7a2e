// The parked coroutine behind the HTTP/1.1 session's wait for input (an
// internal class of the module, so included from src/).
#include "../../../src/net/input_park.hpp"

#include <memory>
#include <optional>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

namespace relay::net {
namespace {

namespace asio = boost::asio;

// One coroutine parked once; `woken` is what it was woken with.
class ParkedOnce : public ::testing::Test {
 protected:
  void SetUp() override {
    asio::co_spawn(io, parkOnce(), asio::detached);
    io.poll();
    ASSERT_TRUE(park.parked());
    ASSERT_FALSE(woken);
  }
  asio::awaitable<void> parkOnce() { woken = co_await park.park(); }

  asio::io_context io;
  InputPark park{io.get_executor()};
  std::optional<bool> woken;
};

TEST_F(ParkedOnce, ResumeRunsTheParkedCoroutineAtOnceWithTheValue) {
  park.resume(false);  // on this stack: done when the call returns
  EXPECT_FALSE(park.parked());
  ASSERT_TRUE(woken);
  EXPECT_FALSE(*woken);
}

TEST_F(ParkedOnce, ResumeLaterRunsItFromTheScheduler) {
  park.resumeLater(true);
  EXPECT_FALSE(park.parked());
  EXPECT_FALSE(woken);  // not yet: the caller's stack is left alone
  io.poll();
  ASSERT_TRUE(woken);
  EXPECT_TRUE(*woken);
}

TEST(InputPark, ParksAgainAfterEachWake) {
  asio::io_context io;
  InputPark park(io.get_executor());
  int wakes = 0;
  auto loop = [&]() -> asio::awaitable<void> {
    while (co_await park.park())
      ++wakes;
  };
  asio::co_spawn(io, loop(), asio::detached);
  io.poll();
  for (int i = 1; i <= 3; ++i) {
    park.resume(true);
    EXPECT_EQ(wakes, i);
    EXPECT_TRUE(park.parked());
  }
  park.resume(false);  // the loop ends
  EXPECT_FALSE(park.parked());
  io.poll();
  EXPECT_TRUE(io.stopped());  // no work left behind
}

// The shape of the HTTP/1.1 session: the park belongs to an object that the
// parked coroutine itself keeps alive. Nothing else refers to either, so
// only the io_context going away can free them: its ParkedInputs service
// destroys the parked coroutine, which drops the last owner.
struct Session {
  explicit Session(const asio::any_io_executor& ex) : park(ex) {}
  InputPark park;
};

TEST(InputPark, AContextThatGoesAwayFreesWhatIsStillParked) {
  std::weak_ptr<Session> watched;
  {
    asio::io_context io;
    auto session = std::make_shared<Session>(io.get_executor());
    watched = session;
    auto serve = [](std::shared_ptr<Session> self) -> asio::awaitable<void> {
      co_await self->park.park();
      ADD_FAILURE() << "a parked coroutine ran at shutdown";
    };
    asio::co_spawn(io, serve(std::move(session)), asio::detached);
    io.poll();
    ASSERT_FALSE(watched.expired());  // held by its own parked coroutine
    EXPECT_TRUE(watched.lock()->park.parked());
  }
  EXPECT_TRUE(watched.expired());
}

TEST(InputPark, ManyParksOnOneContextAreFreedTogether) {
  std::vector<std::weak_ptr<Session>> watched;
  {
    asio::io_context io;
    for (int i = 0; i < 100; ++i) {
      auto session = std::make_shared<Session>(io.get_executor());
      watched.push_back(session);
      auto serve = [](std::shared_ptr<Session> self) -> asio::awaitable<void> {
        while (co_await self->park.park()) {
        }
      };
      asio::co_spawn(io, serve(std::move(session)), asio::detached);
    }
    io.poll();
    // Some are woken and park again; one ends for good.
    watched[10].lock()->park.resume(true);
    watched[20].lock()->park.resumeLater(true);
    watched[30].lock()->park.resume(false);
    io.poll();
    EXPECT_TRUE(watched[30].expired());
    EXPECT_TRUE(watched[20].lock()->park.parked());
  }
  for (const auto& w : watched)
    EXPECT_TRUE(w.expired());
}

}  // namespace
}  // namespace relay::net
