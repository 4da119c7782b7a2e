#include "relay/net/read_buffer.hpp"

#include <sanitizer/asan_interface.h>  // no-ops unless built with AddressSanitizer

namespace relay::net::detail {
namespace {

// Trivially destructible, so it can be used while the thread's other objects
// are destroyed: after the closer below has run, it takes no block back.
struct BlockList {
  void* blocks[kReadBlocksKept];
  std::size_t count;
  bool closed;
};
thread_local BlockList list{};

// Frees the thread's blocks when the thread ends.
struct Closer {
  // Written on the thread's first kept block: that first use is what
  // registers the destructor for the thread's end. Never read.
  bool armed = false;
  ~Closer() {
    list.closed = true;
    while (list.count > 0) {
      void* block = list.blocks[--list.count];
      ASAN_UNPOISON_MEMORY_REGION(block, kReadBlockBytes);
      ::operator delete(block);
    }
  }
};
thread_local Closer closer;

}  // namespace

// A block on the list is poisoned for AddressSanitizer: a view kept into a
// buffer after it gave its block back is reported as a use after free would
// be, not silently handed another connection's bytes.
void* takeReadBlock() noexcept {
  if (list.count == 0) return nullptr;
  void* block = list.blocks[--list.count];
  ASAN_UNPOISON_MEMORY_REGION(block, kReadBlockBytes);
  return block;
}

bool keepReadBlock(void* block) noexcept {
  if (list.closed || list.count == kReadBlocksKept) return false;
  closer.armed = true;
  ASAN_POISON_MEMORY_REGION(block, kReadBlockBytes);
  list.blocks[list.count++] = block;
  return true;
}

std::size_t readBlocksHeld() noexcept {
  return list.count;
}

}  // namespace relay::net::detail
