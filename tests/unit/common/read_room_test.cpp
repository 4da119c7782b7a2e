#include "relay/common/read_room.hpp"

#include <string>

#include <gtest/gtest.h>

namespace relay {
namespace {

// A stream's reads after a short held tail: the buffer stays about one read
// long, where appending alone would double it past the read.
TEST(ReadRoom, AReadAfterAShortTailGetsAboutItsOwnSize) {
  std::string s(100, 't');  // the start of an unfinished event
  reserveForRead(s, 16384);
  EXPECT_GE(s.capacity(), 16484U);
  EXPECT_LE(s.capacity(), 16484U + 16484U / 8 + 32);  // not 32 KiB
  s.append(16384, 'r');
  // The next read after the same tail fits without growing.
  s.resize(100);
  const std::size_t capacity = s.capacity();
  reserveForRead(s, 16384);
  EXPECT_EQ(s.capacity(), capacity);
}

// A buffer that has grown once already: a longer tail and a read still get
// about their own size (the string's reserve() alone would double it).
TEST(ReadRoom, ABufferThatGrewOnceGrowsToAboutTheReadAgain) {
  std::string s(100, 't');
  reserveForRead(s, 16384);
  s.resize(2500);  // a longer unfinished event held
  reserveForRead(s, 16384);
  EXPECT_GE(s.capacity(), 18884U);
  EXPECT_LE(s.capacity(), 18884U + 18884U / 8 + 32);              // not 37 KiB
  EXPECT_EQ(s, std::string(100, 't') + std::string(2400, '\0'));  // the bytes kept
}

// Without it: what std::string's own growth would keep.
TEST(ReadRoom, AppendingAloneWouldHoldTwiceTheRead) {
  std::string s(100, 't');
  s.reserve(16384);
  s.append(16384, 'r');
  EXPECT_GE(s.capacity(), 32768U);
}

// One long event arriving in small pieces: the held bytes outgrow each read
// and the buffer doubles, so the copies stay linear in the event's length.
TEST(ReadRoom, ALongEventInSmallPiecesDoubles) {
  std::string s;
  int grown = 0;
  for (int i = 0; i < 4096; ++i) {
    const std::size_t before = s.capacity();
    reserveForRead(s, 256);
    s.append(256, 'e');
    if (s.capacity() != before) ++grown;
  }
  EXPECT_EQ(s.size(), 4096U * 256U);
  EXPECT_LE(grown, 16);  // log2 of the growth, not one per piece
}

}  // namespace
}  // namespace relay
