// The process's memory as /metrics shows it (docs/metrics.md): its resident
// set, read at scrape time, and how often a worker that went idle after load
// handed what the load left in its heap back to the system
// (src/app/memory_release.hpp). A relaxed atomic, moved once per idle period.
#pragma once

#include <cstddef>
#include <cstdint>

namespace relay {

// The process's resident set, bytes (/proc/self/statm; 0 if unreadable).
std::size_t residentBytes();

void countMemorySweep();
std::uint64_t memorySweeps();

}  // namespace relay
