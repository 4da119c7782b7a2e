#include "relay/net/read_buffer.hpp"

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
  bool armed = false;
  ~Closer() {
    list.closed = true;
    while (list.count > 0)
      ::operator delete(list.blocks[--list.count]);
  }
};
thread_local Closer closer;

}  // namespace

void* takeReadBlock() noexcept {
  return list.count > 0 ? list.blocks[--list.count] : nullptr;
}

bool keepReadBlock(void* block) noexcept {
  if (list.closed || list.count == kReadBlocksKept) return false;
  closer.armed = true;  // its first use registers it to run at the thread's end
  list.blocks[list.count++] = block;
  return true;
}

std::size_t readBlocksHeld() noexcept {
  return list.count;
}

}  // namespace relay::net::detail
