// A per-thread string for text that is made and written at once (a response
// or request head): one buffer serves every request of the thread, so the
// common path allocates nothing for it. `Tag` gives each user its own buffer,
// so one cannot overwrite another's between making and writing.
//
// The buffer keeps its capacity between uses unless a huge head made it grow
// past `KeepBytes`; then it is freed at the thread's next use, so one
// outsized head does not hold memory for the thread's life. Text that must
// outlive the call that made it (a write that has to wait for room) is copied
// out first.
#pragma once

#include <cstddef>
#include <string>

namespace relay {

template <class Tag, std::size_t KeepBytes = 16 * 1024>
std::string& threadScratch() {
  thread_local std::string scratch;
  if (scratch.capacity() > KeepBytes) std::string().swap(scratch);
  return scratch;
}

}  // namespace relay
