// steady_clock's time as of the kernel's last timer tick.
//
// steady_clock::now() reads the time stamp counter through the vDSO: about
// 25 ns here (kvm-clock), against about 4 ns for the coarse clock, and a
// request used to read it some twenty times. Where a few milliseconds do not
// matter — idle deadlines of seconds, how long a pooled connection sat idle —
// the coarse reading does. Never where a time is measured (latency, time to
// first token) or where a deadline is short.
#pragma once

#include <chrono>
#include <ctime>

namespace relay {

// CLOCK_MONOTONIC_COARSE, the clock steady_clock reads (CLOCK_MONOTONIC) as
// of the last tick: behind it by a tick or a few (4 ms each at 250 Hz), never
// ahead of it.
inline std::chrono::steady_clock::time_point coarseSteadyNow() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

}  // namespace relay
