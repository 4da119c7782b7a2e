#include "worker_tick.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include "memory_release.hpp"
#include "relay/common/memory_stats.hpp"
#include "relay/pipeline/worker.hpp"

namespace relay::app {

namespace asio = boost::asio;
using SteadyClock = std::chrono::steady_clock;

asio::awaitable<void> runWorkerTick(pipeline::Worker& w, unsigned worker, unsigned workers,
                                    std::chrono::milliseconds every) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  IdleEdge idle(idleThreshold(every));
  timer.expires_after(every + every * worker / workers);
  for (;;) {
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    if (idle.tick(threadCpuTime())) {
      const bool logged = spdlog::should_log(spdlog::level::debug);
      const auto start = SteadyClock::now();
      const std::size_t before = logged ? residentBytes() : 0;
      MemorySweep sweep;
      std::size_t batches = 0;
      while (sweep.giveBack(kSweepBatchPages)) {
        ++batches;
        co_await asio::post(executor, asio::use_awaitable);
      }
      countMemorySweep();
      if (logged)
        spdlog::debug(
            "worker {} idle: heap swept, RSS {} -> {} KiB ({} pages given back in {} batches, "
            "{} us)",
            worker, before / 1024, residentBytes() / 1024, sweep.pagesTaken(), batches + 1,
            std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - start)
                .count());
    } else {
      collectThreadCache();
    }
    // The tick's own work, as the sweep's: not load that makes the next
    // tick a busy one's end.
    w.closeStaleConnections();
    idle.exclude(threadCpuTime());
    timer.expires_after(every);
  }
}

}  // namespace relay::app
