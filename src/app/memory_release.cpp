#include "memory_release.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <time.h>
#include <vector>

// The allocator's own calls (RELAY_MALLOC in cmake/RelayDependencies.cmake).
#if defined(RELAY_MALLOC_MIMALLOC)
#include <mimalloc.h>
// mimalloc 2.0's segments and delayed decommit, which the sweep is written
// against (2.1 purges in mi_collect; 1.x has no spans).
#if MI_MALLOC_VERSION >= 200 && MI_MALLOC_VERSION < 210
#define RELAY_SWEEP_FREE_SPANS 1
#endif
#elif defined(RELAY_MALLOC_TCMALLOC)
extern "C" void MallocExtension_ReleaseFreeMemory();
extern "C" void MallocExtension_MarkThreadIdle();
#endif

namespace relay::app {

bool IdleEdge::tick(std::chrono::nanoseconds threadCpu) {
  const bool idle = threadCpu - last_ < idleBelow_;
  last_ = threadCpu;
  const bool edge = idle && wasBusy_;
  wasBusy_ = !idle;
  return edge;
}

void IdleEdge::exclude(std::chrono::nanoseconds threadCpu) {
  last_ = threadCpu;
}

std::chrono::nanoseconds threadCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

#if defined(RELAY_SWEEP_FREE_SPANS)
namespace {

// A block just over mimalloc's medium size (128 KiB) gets a page of its own:
// 192 KiB, three 64 KiB slices, taken from the thread's free spans; and a
// page that large is freed as soon as its block is (none is kept for reuse).
constexpr std::size_t kSweepBlockBytes = 128 * 1024 + 1;
// mimalloc 2.0's segments: 32 MiB of address space, aligned to their size.
constexpr std::uintptr_t kSegmentBytes = std::uintptr_t{32} << 20;

std::uintptr_t segmentOf(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) & ~(kSegmentBytes - 1);
}

struct Segments {
  std::vector<std::uintptr_t> bases;  // sorted
  std::size_t max = 0;                // bases told apart at most
  bool overflow = false;              // more than `max`: every base is known
  bool known(std::uintptr_t base) const {
    return overflow || std::binary_search(bases.begin(), bases.end(), base);
  }
};

// The segments holding the thread heap's pages: after mi_collect(true) these
// are all the segments the thread owns (an empty one is given back whole).
// Past `maxSegments` every segment counts as known. The visitor must not
// allocate while mimalloc walks the heap: the vector's room is reserved
// before.
Segments heapSegments(std::size_t maxSegments) {
  Segments segments;
  segments.max = maxSegments;
  segments.bases.reserve(maxSegments);
  mi_heap_visit_blocks(
      mi_heap_get_default(), false,
      [](const mi_heap_t*, const mi_heap_area_t* area, void* block, std::size_t, void* arg) {
        if (block != nullptr) return true;  // areas (pages) only
        auto& s = *static_cast<Segments*>(arg);
        const std::uintptr_t base = segmentOf(area->blocks);
        if (std::find(s.bases.begin(), s.bases.end(), base) != s.bases.end()) return true;
        if (s.bases.size() == s.max) {
          s.overflow = true;
          return false;
        }
        s.bases.push_back(base);
        return true;
      },
      &segments);
  std::sort(segments.bases.begin(), segments.bases.end());
  return segments;
}

// The decommit delay is process-wide (mi_option_set): one batch at a time
// sets it to zero and restores it, so that two never save each other's zero.
std::mutex& delayOption() {
  static std::mutex m;
  return m;
}

}  // namespace
#endif

// mimalloc 2.0 returns a freed span after a delay that each later span freed
// in the same segment extends by a millisecond, so after a burst the delay
// can lie minutes ahead. But a span freed while the delay is zero is
// returned at once, together with the free spans it joins. So: take pages
// until the thread's free spans are used up (the first page from a segment
// outside heapSegments() means mimalloc had no span left and mapped a new
// one; it is freed in the first batch, the segment given back by the last
// one's collection), at most `maxPages`; then free them with the delay at
// zero. Meanwhile the sweep holds every free span the thread had: a page the
// worker needs between batches comes from a new or cached segment.
MemorySweep::MemorySweep([[maybe_unused]] std::size_t maxPages,
                         [[maybe_unused]] std::size_t maxSegments) {
  collectThreadCache();
#if defined(RELAY_SWEEP_FREE_SPANS)
  const Segments segments = heapSegments(maxSegments);
  while (taken_ < maxPages) {
    void* page = mi_malloc(kSweepBlockBytes);
    if (page == nullptr) break;
    std::memcpy(page, &head_, sizeof head_);
    head_ = page;
    ++taken_;
    if (!segments.known(segmentOf(page))) break;
  }
#endif
}

MemorySweep::~MemorySweep() {
  while (giveBack(kMaxSweepPages)) {
  }
}

bool MemorySweep::giveBack([[maybe_unused]] std::size_t pages) {
#if defined(RELAY_SWEEP_FREE_SPANS)
  if (head_ != nullptr) {
    // While the delay is zero, another worker's freed spans are returned at
    // once too: a few madvise calls more for the milliseconds a batch lasts.
    std::lock_guard lock(delayOption());
    const long delay = mi_option_get(mi_option_decommit_delay);
    mi_option_set(mi_option_decommit_delay, 0);
    for (std::size_t n = 0; n < pages && head_ != nullptr; ++n) {
      void* next = nullptr;
      std::memcpy(&next, head_, sizeof next);
      mi_free(head_);
      head_ = next;
    }
    mi_option_set(mi_option_decommit_delay, delay);
    if (head_ != nullptr) return true;
  }
  if (!collected_) {
    collected_ = true;
    mi_collect(true);  // a segment the sweep mapped goes back too
  }
#endif
  return false;
}

bool MemorySweep::sweepsFreeSpans() {
#if defined(RELAY_SWEEP_FREE_SPANS)
  return true;
#else
  return false;
#endif
}

void collectThreadCache() {
#if defined(RELAY_MALLOC_MIMALLOC)
  mi_collect(true);
#elif defined(RELAY_MALLOC_TCMALLOC)
  MallocExtension_MarkThreadIdle();
#endif
}

void releaseProcessFreeMemory() {
#if defined(RELAY_MALLOC_MIMALLOC)
  mi_collect(true);
#elif defined(RELAY_MALLOC_TCMALLOC)
  MallocExtension_ReleaseFreeMemory();
#endif
}

}  // namespace relay::app
