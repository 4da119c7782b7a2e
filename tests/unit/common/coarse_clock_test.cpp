// coarseSteadyNow (relay/common/coarse_clock.hpp): the same clock as
// steady_clock, never ahead of it, and behind it by ticks, not seconds.
#include "relay/common/coarse_clock.hpp"

#include <chrono>

#include <gtest/gtest.h>

namespace relay {
namespace {

TEST(CoarseClock, IsSteadyClocksTimeNeverAheadAndAtMostAFewTicksBehind) {
  for (int i = 0; i < 1000; ++i) {
    const auto coarse = coarseSteadyNow();
    const auto precise = std::chrono::steady_clock::now();
    ASSERT_LE(coarse, precise) << "the coarse clock ran ahead";
    // A tick is 1 to 10 ms (HZ 1000 to 100); a tickless idle CPU catches up
    // on waking. A different clock (CLOCK_REALTIME, boot time) would be off
    // by years or by the machine's uptime.
    ASSERT_LT(precise - coarse, std::chrono::milliseconds(100));
  }
}

}  // namespace
}  // namespace relay
