#include "relay/common/memory_stats.hpp"

#include <atomic>
#include <cstdio>
#include <unistd.h>

namespace relay {
namespace {

std::atomic<std::uint64_t> gSweeps{0};

}  // namespace

std::size_t residentBytes() {
  // /proc/self/statm: size, resident, ... in pages.
  FILE* f = std::fopen("/proc/self/statm", "re");
  if (f == nullptr) return 0;
  unsigned long pages = 0, resident = 0;
  if (std::fscanf(f, "%lu %lu", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

void countMemorySweep() {
  gSweeps.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t memorySweeps() {
  return gSweeps.load(std::memory_order_relaxed);
}

}  // namespace relay
