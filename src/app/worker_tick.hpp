// Each worker's periodic tick (server.memory_release_ms): idle upstream and
// MCP connections closed, memory handed back. Included by gateway.cpp only.
#pragma once

#include <chrono>

#include <boost/asio/awaitable.hpp>

namespace relay::pipeline {
class Worker;
}

namespace relay::app {

// Every `every` (server.memory_release_ms), on each worker's own thread (an
// allocator's thread cache or heap can only be emptied by its own thread):
// - upstream and MCP server connections idle past their time are closed
//   (the worker's pools: Worker::closeStaleConnections());
// - the worker's empty pages and thread cache go back to the allocator
//   (collectThreadCache(); after a burst a few hundred microseconds, idle
//   nothing to do);
// - on the first tick the worker spent idle after a busy one, what the burst
//   left in its heap goes back to the system (MemorySweep, with mimalloc 2.0:
//   4-26 ms per worker after 19,000 streams, in batches of
//   kSweepBatchPages with the loop running between them);
// - with tcmalloc the flusher thread hands free pages to the system on the
//   same interval (flusherLoop()).
// Worker i's first tick comes i/workers of a tick late: the ticks are
// staggered, so that two never sweep at once (a batch holds the allocator
// option's lock). Each sweep counts in kimi_relay_memory_sweeps_total.
boost::asio::awaitable<void> runWorkerTick(pipeline::Worker& w, unsigned worker, unsigned workers,
                                           std::chrono::milliseconds every);

}  // namespace relay::app
