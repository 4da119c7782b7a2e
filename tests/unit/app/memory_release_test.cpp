// The hand-back of memory after load (src/app/memory_release.cpp), with the
// allocator the binaries link (relay_malloc). With the system allocator
// (sanitizer builds) only the idle detection is tested; the sweep's tests
// skip where the allocator needs none (MemorySweep::sweepsFreeSpans()).
#include "memory_release.hpp"

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "relay/common/memory_stats.hpp"

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

// 0.2 % of the tick, kept below a millisecond: server.memory_release_ms's
// floor (100 ms), a tick just under a second, and the default.
TEST(IdleEdge, TheThresholdIsAShareOfTheTick) {
  EXPECT_EQ(idleThreshold(milliseconds(100)), std::chrono::microseconds(200));
  EXPECT_EQ(idleThreshold(milliseconds(999)), std::chrono::microseconds(1998));
  EXPECT_EQ(idleThreshold(milliseconds(10'000)), milliseconds(20));
  IdleEdge edge(idleThreshold(milliseconds(100)));
  EXPECT_TRUE(edge.tick(std::chrono::microseconds(199)));  // start-up under 200 us: idle
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

// A block on the thread's heap that the compiler cannot elide together with
// its free (GCC drops a malloc/free pair whose block is never used).
void* volatile gHeld = nullptr;
void* heldBlock(std::size_t size) {
  void* p = std::malloc(size);
  gHeld = p;
  return p;
}

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

// Runs `fn` on a thread of its own, with a fresh heap as a worker has (the
// main thread's holds gtest's). Each test returns what its burst left before
// its thread ends: the next one measures from there. mimalloc's decommit
// delay is set an hour ahead meanwhile: a freed span stays resident until
// the sweep, as after a long burst, whatever the scheduler does to this
// thread.
template <typename Fn>
void onOwnThread(Fn fn) {
  const long delay = mi_option_get(mi_option_decommit_delay);
  mi_option_set(mi_option_decommit_delay, 3'600'000);
  std::thread t(fn);
  t.join();
  mi_option_set(mi_option_decommit_delay, delay);
}

class MemorySweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!MemorySweep::sweepsFreeSpans()) GTEST_SKIP() << "this allocator needs no sweep";
  }
};

TEST_F(MemorySweepTest, WhatABurstLeftInTheHeapGoesBack) {
  onOwnThread([] {
    const long rssStart = rssKiB();
    std::vector<void*> kept = burst();
    // What the periodic collection alone does: the spans stay resident.
    mi_collect(true);
    const long rssCollected = rssKiB();
    ASSERT_GT(rssCollected - rssStart, 32 * 1024) << "the burst left nothing to return";

    std::size_t taken = 0;
    {
      MemorySweep sweep;
      taken = sweep.pagesTaken();
    }
    const long rssAfter = rssKiB();
    EXPECT_GT(taken, 0u);
    EXPECT_LE(taken, kMaxSweepPages);
    EXPECT_LT(rssAfter - rssStart, 8 * 1024)
        << "RSS " << rssStart << " KiB at the start, " << rssCollected << " after the burst, "
        << rssAfter << " after the sweep (" << taken << " pages)";
    // The long-lived blocks are intact and the heap still serves.
    for (void* p : kept)
      std::free(p);
    void* again = std::malloc(300 * 1024);
    ASSERT_NE(again, nullptr);
    std::memset(again, 2, 300 * 1024);
    std::free(again);
  });
}

TEST_F(MemorySweepTest, InBatches) {
  onOwnThread([] {
    const long rssStart = rssKiB();
    std::vector<void*> kept = burst();
    mi_collect(true);
    MemorySweep sweep;
    const std::size_t taken = sweep.pagesTaken();
    ASSERT_GT(taken, 2 * kSweepBatchPages);
    // Taking the pages returns nothing yet; the batches return it.
    const long rssTaken = rssKiB();
    EXPECT_GT(rssTaken - rssStart, 32 * 1024);
    std::size_t calls = 1, fell = 0;
    long last = rssTaken;
    while (sweep.giveBack(kSweepBatchPages)) {
      ++calls;
      const long now = rssKiB();
      if (now < last) ++fell;
      last = now;
    }
    EXPECT_EQ(calls, (taken + kSweepBatchPages - 1) / kSweepBatchPages);
    EXPECT_GE(fell, calls / 2) << "RSS fell in " << fell << " of " << calls << " batches";
    EXPECT_FALSE(sweep.giveBack(kSweepBatchPages));  // and stays done
    EXPECT_LT(rssKiB() - rssStart, 8 * 1024);
    for (void* p : kept)
      std::free(p);
  });
}

TEST_F(MemorySweepTest, WhatASweepStillHoldsGoesBackWithIt) {
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

TEST_F(MemorySweepTest, TheSweepStopsAtItsCeiling) {
  onOwnThread([] {
    std::vector<void*> kept = burst();
    {
      MemorySweep capped(5);
      EXPECT_EQ(capped.pagesTaken(), 5u);  // the burst's spans ask for more
    }
    {
      MemorySweep none(0);
      EXPECT_EQ(none.pagesTaken(), 0u);
    }
    for (void* p : kept)
      std::free(p);
    MemorySweep all;  // what the capped sweeps left: the next test starts from here
  });
}

TEST_F(MemorySweepTest, TheSweepEndsWhereTheFreeSpansEnd) {
  // A thread that freed nothing and holds one block has one segment, mostly
  // free: the sweep takes its spans (32 MiB / 192 KiB, about 170 pages),
  // then one page from a new segment, and stops there, far under its ceiling.
  onOwnThread([] {
    void* one = heldBlock(100);
    std::size_t taken = 0;
    {
      MemorySweep sweep;
      taken = sweep.pagesTaken();
    }
    EXPECT_GT(taken, 100u) << "the sweep stopped before the segment's spans were used up";
    EXPECT_LE(taken, 2 * 171u);
    std::free(one);
  });
}

TEST_F(MemorySweepTest, PastTheSegmentsItTellsApartItRunsToItsCeiling) {
  // The same one-segment thread. Told one segment apart, the sweep stops
  // where its spans end; told none, it cannot tell a page from a new segment
  // and takes pages up to its ceiling, set past where the spans end.
  onOwnThread([] {
    void* one = heldBlock(100);
    constexpr std::size_t kCeiling = 2 * 171 + 60;
    {
      MemorySweep oneSegment(kCeiling, 1);
      EXPECT_GT(oneSegment.pagesTaken(), 100u);
      EXPECT_LE(oneSegment.pagesTaken(), 2 * 171u);
    }
    {
      MemorySweep noSegment(kCeiling, 0);
      EXPECT_EQ(noSegment.pagesTaken(), kCeiling);
    }
    std::free(one);
  });
}

TEST_F(MemorySweepTest, TheDecommitDelayIsRestored) {
  // Each batch sets the process-wide delay to zero and puts it back.
  const long delay = mi_option_get(mi_option_decommit_delay);
  mi_option_set(mi_option_decommit_delay, 1234);
  std::thread t([] {
    std::vector<void*> kept = burst();
    MemorySweep sweep;
    while (sweep.giveBack(kSweepBatchPages))
      EXPECT_EQ(mi_option_get(mi_option_decommit_delay), 1234);
    for (void* p : kept)
      std::free(p);
  });
  t.join();
  EXPECT_EQ(mi_option_get(mi_option_decommit_delay), 1234);
  mi_option_set(mi_option_decommit_delay, delay);
}

#endif

}  // namespace
}  // namespace relay::app
