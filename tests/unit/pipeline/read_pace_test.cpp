// ReadPace (relay/pipeline/read_pace.hpp): a stream reads small while its
// caller is behind, and large again only after kCaughtUpWrites writes in a
// row went at once.
#include "relay/pipeline/read_pace.hpp"

#include <gtest/gtest.h>

namespace relay::pipeline {
namespace {

TEST(ReadPace, ACallerThatKeepsUpGetsTheTransportsReads) {
  ReadPace pace;
  for (int i = 0; i < 100; ++i)
    EXPECT_FALSE(pace.afterWrite(false));
  EXPECT_FALSE(pace.behind());
  EXPECT_EQ(pace.readSize(), 0U);
}

TEST(ReadPace, AWriteTheCallerDidNotTakeAtOnceMakesReadsSmall) {
  ReadPace pace;
  EXPECT_TRUE(pace.afterWrite(true));  // changed: the stream is told
  EXPECT_TRUE(pace.behind());
  EXPECT_EQ(pace.readSize(), ReadPace::kBehindBytes);
  EXPECT_FALSE(pace.afterWrite(true));  // unchanged: not told again
}

// At the edge: kCaughtUpWrites - 1 writes at once keep the reads small; the
// next one makes them large again.
TEST(ReadPace, ReadsAreLargeAgainAfterKCaughtUpWritesInARowAndNotOneBefore) {
  ReadPace pace;
  pace.afterWrite(true);
  for (int i = 0; i + 1 < ReadPace::kCaughtUpWrites; ++i)
    EXPECT_FALSE(pace.afterWrite(false)) << i;
  EXPECT_TRUE(pace.behind());
  EXPECT_TRUE(pace.afterWrite(false));
  EXPECT_FALSE(pace.behind());
  EXPECT_EQ(pace.readSize(), 0U);
}

// A slow caller whose socket takes a small write now and then stays on
// small reads: a write it did not take starts the count again.
TEST(ReadPace, AWriteNotTakenAtOnceStartsTheCountAgain) {
  ReadPace pace;
  pace.afterWrite(true);
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i + 1 < ReadPace::kCaughtUpWrites; ++i)
      EXPECT_FALSE(pace.afterWrite(false));
    EXPECT_FALSE(pace.afterWrite(true));
  }
  EXPECT_TRUE(pace.behind());
}

}  // namespace
}  // namespace relay::pipeline
