// The hand-back of memory after load (src/app/memory_release.cpp), with the
// allocator the binaries link (relay_malloc). With the system allocator
// (sanitizer builds) only the idle detection is tested.
#include "memory_release.hpp"

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#if defined(RELAY_MALLOC_MIMALLOC)
#include <mimalloc.h>
#endif

namespace relay::app {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

TEST(IdleEdge, TheFirstIdleTickAfterBusyOnesCountsOnce) {
  IdleEdge edge(milliseconds(20));
  EXPECT_FALSE(edge.tick(milliseconds(500)));  // busy: 500 ms since start
  EXPECT_FALSE(edge.tick(milliseconds(900)));  // busy
  EXPECT_TRUE(edge.tick(milliseconds(905)));   // idle after busy
  EXPECT_FALSE(edge.tick(milliseconds(906)));  // still idle: not again
  EXPECT_FALSE(edge.tick(milliseconds(907)));
  EXPECT_FALSE(edge.tick(milliseconds(1000)));  // busy again
  EXPECT_TRUE(edge.tick(milliseconds(1001)));   // and idle: once more
}

TEST(IdleEdge, StartingIdleCounts) {
  // Start-up (config, TLS, the first pools) allocates and frees too.
  IdleEdge edge(milliseconds(20));
  EXPECT_TRUE(edge.tick(milliseconds(3)));
  EXPECT_FALSE(edge.tick(milliseconds(4)));
}

TEST(IdleEdge, TheThresholdItselfIsBusy) {
  IdleEdge edge(milliseconds(20));
  EXPECT_TRUE(edge.tick(milliseconds(0)));
  EXPECT_FALSE(edge.tick(milliseconds(20)));                  // exactly 20 ms: busy
  EXPECT_TRUE(edge.tick(milliseconds(40) - nanoseconds(1)));  // 1 ns under: idle
}

TEST(IdleEdge, TheTicksOwnWorkIsExcluded) {
  IdleEdge edge(milliseconds(20));
  EXPECT_FALSE(edge.tick(milliseconds(100)));
  EXPECT_TRUE(edge.tick(milliseconds(101)));
  // The release took 30 ms of the thread's CPU; the next tick is still idle
  // (and not a new edge), not busy because of it.
  edge.exclude(milliseconds(131));
  EXPECT_FALSE(edge.tick(milliseconds(132)));
  EXPECT_FALSE(edge.tick(milliseconds(133)));
}

TEST(IdleEdge, ThreadCpuTimeMovesWithWork) {
  const nanoseconds before = threadCpuTime();
  volatile unsigned long sink = 0;
  for (unsigned long i = 0; i < 20'000'000; ++i)
    sink = sink + i;
  EXPECT_GT(threadCpuTime() - before, nanoseconds(0));
}

#if defined(RELAY_MALLOC_MIMALLOC)

long rssKiB() {
  return static_cast<long>(residentBytes() / 1024);
}

constexpr std::size_t kMiB = 1024 * 1024;

// What a burst of streams does to a worker's heap: many blocks of the sizes a
// stream holds (frames, buffers), a few long-lived ones among them (a pooled
// connection, a metric series), then everything but those freed in another
// order. Returns the long-lived blocks. About 56 MiB at the peak.
std::vector<void*> burst() {
  const std::size_t sizes[] = {48,   96,   160,  208,  320,   560,  768,
                               1233, 2048, 4096, 8192, 16384, 24000};
  std::vector<void*> blocks, kept;
  blocks.reserve(1000 * std::size(sizes));
  for (int set = 0; set < 1000; ++set) {
    for (std::size_t size : sizes) {
      void* p = std::malloc(size);
      std::memset(p, 1, size);
      blocks.push_back(p);
    }
    if (set % 25 == 0) kept.push_back(std::malloc(64 + set % 7 * 300));
  }
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(7));
  for (void* p : blocks)
    std::free(p);
  return kept;
}

// Runs `fn` on a thread of its own: a fresh mimalloc heap and segments, as a
// worker has (the test's main thread has gtest's).
template <typename Fn>
void onOwnThread(Fn fn) {
  std::thread t(fn);
  t.join();
}

TEST(ReturnFreeMemory, WhatABurstLeftInTheHeapGoesBack) {
  onOwnThread([] {
    const long rssStart = rssKiB();
    std::vector<void*> kept = burst();
    // What the periodic collection alone does: the spans stay resident.
    mi_collect(true);
    const long rssCollected = rssKiB();
    ASSERT_GT(rssCollected - rssStart, 32 * 1024)
        << "the burst left nothing to return: this test proves nothing with this allocator";

    const Released r = returnFreeMemory();
    const long rssAfter = rssKiB();
    EXPECT_GT(r.sweepPages, 0u);
    EXPECT_LE(r.sweepPages, kMaxSweepPages);
    EXPECT_LT(r.residentAfter + 32 * kMiB, r.residentBefore);
    EXPECT_LT(rssAfter - rssStart, 8 * 1024)
        << "RSS " << rssStart << " KiB at the start, " << rssCollected << " after the burst, "
        << rssAfter << " after returnFreeMemory()";
    // The long-lived blocks are intact and the heap still serves.
    for (void* p : kept)
      std::free(p);
    void* again = std::malloc(300 * 1024);
    ASSERT_NE(again, nullptr);
    std::memset(again, 2, 300 * 1024);
    std::free(again);
  });
}

TEST(ReturnFreeMemory, TheSweepStopsAtItsCeiling) {
  onOwnThread([] {
    std::vector<void*> kept = burst();
    const Released capped = returnFreeMemory(5);
    EXPECT_EQ(capped.sweepPages, 5u);  // the burst's commit asks for more
    const Released none = returnFreeMemory(0);
    EXPECT_EQ(none.sweepPages, 0u);
    for (void* p : kept)
      std::free(p);
    returnFreeMemory();  // what the capped sweeps left, for the next test
  });
}

TEST(ReturnFreeMemory, InBatches) {
  onOwnThread([] {
    const long rssStart = rssKiB();
    std::vector<void*> kept = burst();
    mi_collect(true);
    const long rssCollected = rssKiB();
    MemorySweep sweep;
    const std::size_t taken = sweep.pagesTaken();
    ASSERT_GT(taken, 2 * kSweepBatchPages);
    // Taking the pages returns nothing yet; each batch returns some.
    EXPECT_GT(rssKiB() - rssStart, 32 * 1024);
    std::size_t calls = 1;
    long last = rssKiB();
    bool fell = false;
    while (sweep.giveBack(kSweepBatchPages)) {
      ++calls;
      const long now = rssKiB();
      fell = fell || now < last;
      last = now;
    }
    EXPECT_TRUE(fell);
    EXPECT_EQ(calls, (taken + kSweepBatchPages - 1) / kSweepBatchPages);
    EXPECT_FALSE(sweep.giveBack(kSweepBatchPages));  // and stays done
    EXPECT_LT(rssKiB() - rssStart, 8 * 1024)
        << rssStart << " KiB at the start, " << rssCollected << " after the burst";
    for (void* p : kept)
      std::free(p);
  });
}

TEST(ReturnFreeMemory, WhatASweepStillHoldsGoesBackWithIt) {
  onOwnThread([] {
    const long rssStart = rssKiB();
    std::vector<void*> kept = burst();
    {
      MemorySweep sweep;
      EXPECT_TRUE(sweep.giveBack(1));
    }  // the rest, by the destructor
    EXPECT_LT(rssKiB() - rssStart, 8 * 1024);
    for (void* p : kept)
      std::free(p);
  });
}

TEST(ReturnFreeMemory, TheSweepEndsWhereTheFreeSpansEnd) {
  // A thread that freed nothing has one segment at most, mostly free: the
  // sweep takes its spans (32 MiB / 192 KiB, about 170 pages), then one page
  // from a new segment, and stops there, far under its ceiling.
  onOwnThread([] {
    void* one = std::malloc(100);
    const Released r = returnFreeMemory();
    EXPECT_GT(r.sweepPages, 0u);
    EXPECT_LE(r.sweepPages, 2 * 171u);
    std::free(one);
  });
}

TEST(ReturnFreeMemory, TheDecommitDelayIsRestored) {
  const long delay = mi_option_get(mi_option_decommit_delay);
  onOwnThread([] { returnFreeMemory(); });
  EXPECT_EQ(mi_option_get(mi_option_decommit_delay), delay);
}

#endif

}  // namespace
}  // namespace relay::app
