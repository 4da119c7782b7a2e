// How much an SSE stream reads from its upstream at a time, by whether its
// caller keeps up.
//
// A caller whose socket is full does not take a write at once, and the
// sink keeps that read's bytes where they are, in the stream's buffer, until
// the caller has taken them (ResponseSink::writeNow(), callerBehind()). A
// stream whose reads are 16 KiB then holds 16 KiB for as long as a slow
// reader takes to read them. While its caller is behind, a stream reads
// kBehindBytes at a time instead, as nginx's proxy buffer does (one page),
// and its buffer is made to fit that (relay/common/read_room.hpp,
// fitForRead()): what a slow reader holds is a page and the end of an
// unfinished event. After kCaughtUpWrites writes in a row that the caller
// took at once, the stream reads whole reads again: one hiccup of a fast
// caller costs it a few small reads, and a slow caller whose socket takes
// one small write now and then does not flip back to large reads.
//
// The first read a caller falls behind on was a large one: that one read
// is held until the caller takes it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace relay::pipeline {

class ReadPace {
 public:
  static constexpr std::size_t kBehindBytes = 4096;
  static constexpr std::uint8_t kCaughtUpWrites = 16;

  // After each write to the caller, with the sink's callerBehind(): true
  // when the read size changed (readSize() is the new one).
  bool afterWrite(bool callerBehind) {
    if (callerBehind) {
      caughtUp_ = 0;
      if (behind_) return false;
      behind_ = true;
      return true;
    }
    if (!behind_ || ++caughtUp_ < kCaughtUpWrites) return false;
    behind_ = false;
    caughtUp_ = 0;
    return true;
  }

  bool behind() const { return behind_; }
  // For ResponseStream::setReadSize(): 0 is the transport's own size.
  std::size_t readSize() const { return behind_ ? kBehindBytes : 0; }

 private:
  bool behind_ = false;
  std::uint8_t caughtUp_ = 0;
};

}  // namespace relay::pipeline
