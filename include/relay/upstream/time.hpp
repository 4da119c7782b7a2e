// Time as the resilience logic sees it: every decision takes `now` as an
// argument and never reads a clock, so tests replay exact instants and never
// sleep. Steady time for deadlines, ejections and buckets; wall time only to
// turn an HTTP-date into a delay.
#pragma once

#include <chrono>
#include <cstdint>

namespace relay::upstream {

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;
using Millis = std::chrono::milliseconds;

// Whole milliseconds since the steady clock's epoch, rounded down.
inline std::int64_t steadyMs(SteadyTime t) {
  return std::chrono::duration_cast<Millis>(t.time_since_epoch()).count();
}

inline SteadyTime steadyFromMs(std::int64_t ms) {
  return SteadyTime(Millis(ms));
}

}  // namespace relay::upstream
