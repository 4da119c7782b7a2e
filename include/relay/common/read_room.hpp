// Room in a string that a read is about to append up to `incoming` bytes to.
//
// A stream's read buffer lives as long as the stream. std::string's own
// growth doubles past what a read needs: a 16 KiB read after a short held
// tail (the start of an unfinished event) would leave a 32 KiB buffer with
// the stream. Here a read larger than what is held gets room for about
// itself; a buffer whose held bytes outgrow each read (one long event
// arriving in pieces) still doubles, so that its copies stay linear.
//
// (libstdc++'s reserve() itself doubles a request under twice the current
// capacity: the exact room is made in a new string, which it sizes as
// asked, and swapped in.)
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

namespace relay {

inline void reserveForRead(std::string& s, std::size_t incoming) {
  if (s.capacity() - s.size() >= incoming) return;
  const std::size_t need = s.size() + incoming;
  if (s.size() > incoming) {
    s.reserve(std::max(2 * s.capacity(), need));
    return;
  }
  std::string room;
  room.reserve(need + need / 8);
  room.append(s);
  s.swap(room);
}

}  // namespace relay
