// Handing memory back to the system after load. Plain C++: no Asio; the
// gateway calls these from each worker's periodic timer (gateway.cpp).
//
// Why more than mi_collect(true): mimalloc 2.0 (Debian 12's) returns a freed
// span of a segment to the system only after a delay (25 ms), which every
// later span freed in that segment (a page emptied) extends by a millisecond,
// and it checks the delay only when it next allocates a page in that
// segment. A burst of streams leaves free spans in segments that also hold a
// few long-lived blocks, with delays minutes ahead; once the worker goes idle
// nothing allocates there again, and the spans stay resident: 28-99 MiB
// after 19,000 streams where the process started at 12 (docs/benchmarks.md,
// "Memory kept after a burst"). mi_collect(true) frees empty pages and empty
// segments, not those spans. mimalloc 2.1 purges them in mi_collect; with it
// (and with tcmalloc or the system allocator) a sweep only collects.
#pragma once

#include <chrono>
#include <cstddef>

namespace relay::app {

// Tick by tick, whether a worker has just gone idle: its thread used less
// than `idleBelow` of CPU since the last tick, after a tick when it used more.
// The first idle tick counts (start-up allocates and frees too); a run of
// idle ticks counts once.
class IdleEdge {
 public:
  explicit IdleEdge(std::chrono::nanoseconds idleBelow) : idleBelow_(idleBelow) {}
  // `threadCpu`: the thread's CPU time now (threadCpuTime()).
  bool tick(std::chrono::nanoseconds threadCpu);
  // The work the tick itself did (a collection, a sweep) ends at
  // `threadCpu`; it does not make the next tick busy.
  void exclude(std::chrono::nanoseconds threadCpu);

 private:
  std::chrono::nanoseconds idleBelow_;
  std::chrono::nanoseconds last_{0};
  bool wasBusy_ = true;
};

// A worker is idle over a tick of `tick` when its thread used less CPU than
// this: 0.2 % of a core (20 ms of the default 10 s), in nanoseconds so that
// a short tick keeps its share (200 us of 100 ms).
inline constexpr unsigned kIdleCpuShare = 500;  // 1 / 500 of the tick
inline std::chrono::nanoseconds idleThreshold(std::chrono::milliseconds tick) {
  return std::chrono::nanoseconds(tick) / kIdleCpuShare;
}

// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
std::chrono::nanoseconds threadCpuTime();

// A sweep takes at most this many 192 KiB pages (768 MiB of free spans, 4
// KiB of each touched): free spans past it stay until the next idle period.
inline constexpr std::size_t kMaxSweepPages = 4096;
// Segments of the thread's heap a sweep tells apart (mimalloc 2.0: 32 MiB of
// address space each, 32 GiB in all); with more, it cannot tell a page from
// a new segment and takes pages up to its page ceiling.
inline constexpr std::size_t kMaxSweepSegments = 1024;
// Pages given back per call of MemorySweep::giveBack() from the gateway: 6
// MiB, and the free spans they join, for the kernel to unmap; about 2 ms
// here (0.28 ms per MiB).
inline constexpr std::size_t kSweepBatchPages = 32;

// Returns what a burst left in the calling thread's heap to the system (an
// allocator's thread heap is emptied only by its own thread). The
// constructor frees the heap's empty pages, then takes pages of 192 KiB until
// the thread's free spans are used up (about 2 ms per 1,000 pages); each
// giveBack() frees a batch of them so that the spans they cover are returned
// at once, and the event loop can run between batches. The destructor gives
// back what is left.
class MemorySweep {
 public:
  explicit MemorySweep(std::size_t maxPages = kMaxSweepPages,
                       std::size_t maxSegments = kMaxSweepSegments);
  MemorySweep(const MemorySweep&) = delete;
  MemorySweep& operator=(const MemorySweep&) = delete;
  ~MemorySweep();

  // Gives back up to `pages` of the pages taken; false once none is left.
  bool giveBack(std::size_t pages);
  std::size_t pagesTaken() const { return taken_; }

  // Whether this build's allocator needs the pages taken at all (mimalloc
  // 2.0); with any other, a sweep is a collection (collectThreadCache()).
  static bool sweepsFreeSpans();

 private:
  void* head_ = nullptr;  // the pages taken, linked through their first word
  std::size_t taken_ = 0;
  bool collected_ = false;
};

// The cheap, every-tick part: empty pages and thread caches back to the
// shared pool (mi_collect(true) / MallocExtension_MarkThreadIdle()).
void collectThreadCache();

// The process-wide part, from any thread (mi_collect(true) /
// MallocExtension_ReleaseFreeMemory()).
void releaseProcessFreeMemory();

}  // namespace relay::app
