// The read buffer of a connection: a Beast flat_buffer whose one-read blocks
// are recycled through a small per-thread list.
//
// Why: a connection that waits holds no read buffer (relay/net/edge_read.hpp:
// an open stream between events costs its socket only), so every arrival
// prepares one and every drained buffer gives it back. From the heap that
// is a 16 KiB allocation and free per read — some 170 instructions, for each
// event of a stream whose upstream writes them one by one. From the list it
// is a pointer moved.
//
// The bound: a thread keeps at most kReadBlocksKept blocks (256 KiB) between
// uses; a block given back to a full list goes to the heap, and so does any
// other size (a buffer grown for a long head, a read-ahead). Each thread that
// gives blocks back has its own list: the workers, and at shutdown or a
// reload the thread that drops connections. The blocks are freed when the
// thread ends. Under AddressSanitizer a block on a list is poisoned.
#pragma once

#include <cstddef>
#include <new>

#include <boost/beast/core/flat_buffer.hpp>

namespace relay::net {

// One read's room: what the HTTP/1.1 session and the upstream client ask for.
inline constexpr std::size_t kReadBlockBytes = 16 * 1024;
inline constexpr std::size_t kReadBlocksKept = 16;

namespace detail {
// A block from this thread's list, or nullptr when it is empty.
void* takeReadBlock() noexcept;
// Keeps `block` (kReadBlockBytes, from operator new) on this thread's list;
// false when the list is full (or the thread is ending): the caller frees it.
bool keepReadBlock(void* block) noexcept;
// How many blocks this thread's list holds (for the tests).
std::size_t readBlocksHeld() noexcept;
}  // namespace detail

template <class T>
struct ReadBlockAllocator {
  using value_type = T;
  ReadBlockAllocator() = default;
  // Rebinding converts implicitly, as with std::allocator.
  template <class U>
  ReadBlockAllocator(const ReadBlockAllocator<U>&) noexcept {}  // NOLINT

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes == kReadBlockBytes) {
      if (void* block = detail::takeReadBlock()) return static_cast<T*>(block);
    }
    return static_cast<T*>(::operator new(bytes));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) == kReadBlockBytes && detail::keepReadBlock(p)) return;
    ::operator delete(p);
  }
  template <class U>
  bool operator==(const ReadBlockAllocator<U>&) const noexcept {
    return true;  // stateless: any one frees what another allocated
  }
};

using ReadBuffer = boost::beast::basic_flat_buffer<ReadBlockAllocator<char>>;

}  // namespace relay::net
