// How a worker runs its event loop: asleep in epoll_wait whenever it has
// nothing to do (the default, as nginx), or, with server.busy_poll_us,
// polling for that long after its last work before it sleeps.
//
// Why poll: a worker that sleeps is woken by the kernel when bytes arrive,
// and on a virtual machine an idle vCPU takes tens of microseconds to wake
// (docs/benchmarks.md, "Busy polling"): at low load that wake-up, twice per
// request (the caller's request, then the upstream's answer), is most of the
// latency the gateway adds. A worker still polling when the bytes arrive
// sees them at once. The price is CPU: a worker burns its core for up to
// the window after every piece of work, so at a trickle of requests it
// spins nearly all the time; an idle gateway sleeps after one window. Only
// a worker that is never idle pays nothing; one that idles between bursts
// pays for each gap (2 µs more per request at 64 connections in
// bench/cpu_split.sh, where the proxy's CPU is not saturated).
#pragma once

#include <chrono>

#include <boost/asio/io_context.hpp>

namespace relay::net {

// Runs `ctx` until it is stopped (or runs out of work). With `busyPoll`
// zero, io_context::run(). Otherwise: run what is ready (one epoll_wait
// with no timeout when nothing is queued); when a poll ran nothing, keep
// polling until `busyPoll` has passed by `now()` since the first poll that
// found nothing, then sleep until one handler runs, and start over.
// `now` is read only on polls that found nothing.
template <class Now>
void runEventLoop(boost::asio::io_context& ctx, std::chrono::microseconds busyPoll, Now now) {
  if (busyPoll.count() <= 0) {
    ctx.run();
    return;
  }
  using TimePoint = decltype(now());
  bool idle = false;
  TimePoint idleSince{};
  while (!ctx.stopped()) {
    if (ctx.poll() != 0) {
      idle = false;
      continue;
    }
    const TimePoint at = now();
    if (!idle) {
      idle = true;
      idleSince = at;
    }
    if (at - idleSince < busyPoll) continue;
    ctx.run_one();  // asleep until there is work
    idle = false;
  }
}

}  // namespace relay::net
