// The per-thread list of read blocks behind ReadBuffer
// (relay/net/read_buffer.hpp): a 16 KiB block given back is the next one
// handed out, the list holds at most kReadBlocksKept, other sizes never go
// on it, a thread's blocks go with the thread, and a block given back while
// the thread ends is freed.
#include "relay/net/read_buffer.hpp"

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace relay::net {
namespace {

// Empties this thread's list, so each test starts from nothing.
void drainList() {
  while (void* block = detail::takeReadBlock())
    ::operator delete(block);
}

TEST(ReadBuffer, AReadBlockGivenBackIsTheNextOneHandedOut) {
  drainList();
  ReadBuffer a;
  auto room = a.prepare(kReadBlockBytes);
  const void* first = room.data();
  std::memset(room.data(), 'x', room.size());
  a.commit(10);
  a.consume(10);
  a.shrink_to_fit();  // an emptied buffer gives its block back
  EXPECT_EQ(a.capacity(), 0U);
  EXPECT_EQ(detail::readBlocksHeld(), 1U);

  ReadBuffer b;
  EXPECT_EQ(b.prepare(kReadBlockBytes).data(), first);
  EXPECT_EQ(detail::readBlocksHeld(), 0U);
}

TEST(ReadBuffer, TheListHoldsAtMostItsBoundAndOneMoreGoesToTheHeap) {
  drainList();
  std::vector<ReadBuffer> buffers(kReadBlocksKept + 1);
  for (ReadBuffer& b : buffers)
    b.prepare(kReadBlockBytes);
  EXPECT_EQ(detail::readBlocksHeld(), 0U);
  for (ReadBuffer& b : buffers)
    b.shrink_to_fit();
  EXPECT_EQ(detail::readBlocksHeld(), kReadBlocksKept);  // the last one was freed
  buffers.clear();
  EXPECT_EQ(detail::readBlocksHeld(), kReadBlocksKept);
  drainList();
}

TEST(ReadBuffer, OtherSizesNeverGoOnTheList) {
  drainList();
  {
    ReadBuffer small;
    small.prepare(100);
    ReadBuffer large;
    large.prepare(4 * kReadBlockBytes);
    ReadBuffer grown;
    grown.prepare(kReadBlockBytes);
    grown.commit(kReadBlockBytes);
    grown.prepare(1);  // a second block of twice the size; the first is given back
    EXPECT_EQ(detail::readBlocksHeld(), 1U);
    EXPECT_GT(grown.capacity(), kReadBlockBytes);
  }
  EXPECT_EQ(detail::readBlocksHeld(), 1U);  // the three buffers' own blocks were freed
  drainList();
}

TEST(ReadBuffer, AThreadsBlocksAreFreedWithTheThread) {
  // Under LeakSanitizer a block left on an ended thread's list is a leak
  // report; here, the thread's list is its own and not this one's.
  drainList();
  std::size_t heldThere = 0;
  std::thread t([&] {
    std::vector<ReadBuffer> buffers(3);
    for (ReadBuffer& b : buffers)
      b.prepare(kReadBlockBytes);
    buffers.clear();
    heldThere = detail::readBlocksHeld();
  });
  t.join();
  EXPECT_EQ(heldThere, 3U);
  EXPECT_EQ(detail::readBlocksHeld(), 0U);
}

// A thread-local buffer made before the thread kept any block is destroyed
// after the thread's list was closed (thread-locals end in the reverse order
// of their making): its block must go to the heap, not onto a list nobody
// frees any more.
std::atomic<int> heldAfterLateFree{-1};
struct LateBuffer {
  ReadBuffer buffer;
  ~LateBuffer() {
    buffer.shrink_to_fit();
    heldAfterLateFree = static_cast<int>(detail::readBlocksHeld());
  }
};

TEST(ReadBuffer, ABlockGivenBackAfterTheThreadsListClosedIsFreed) {
  heldAfterLateFree = -1;
  std::size_t heldThere = 0;
  std::thread t([&] {
    thread_local LateBuffer late;  // made first, so destroyed after the list closed
    late.buffer.prepare(kReadBlockBytes);
    ReadBuffer other;
    other.prepare(kReadBlockBytes);
    other.shrink_to_fit();  // the thread's first kept block
    heldThere = detail::readBlocksHeld();
  });
  t.join();
  EXPECT_EQ(heldThere, 1U);
  EXPECT_EQ(heldAfterLateFree.load(), 0);  // 1 when a closed list took it: a leak
}

}  // namespace
}  // namespace relay::net
