// The per-thread head buffer (relay/common/thread_scratch.hpp): its room is
// kept between uses up to its ceiling, given back past it, and each tag has
// a buffer of its own.
#include "relay/common/thread_scratch.hpp"

#include <gtest/gtest.h>

namespace relay {
namespace {

struct TagA;
struct TagB;
struct TagEdge;

TEST(ThreadScratch, KeepsItsRoomUpToTheCeilingAndGivesItBackPastIt) {
  constexpr std::size_t kKeep = 1024;
  auto scratch = []() -> std::string& { return threadScratch<TagEdge, kKeep>(); };
  std::string& s = scratch();
  s.reserve(kKeep);
  const std::size_t atCeiling = s.capacity();
  if (atCeiling <= kKeep) EXPECT_EQ(scratch().capacity(), atCeiling);  // kept at the ceiling
  s.reserve(atCeiling + 1);  // one byte more than it holds: past the ceiling
  ASSERT_GT(s.capacity(), kKeep);
  EXPECT_LE(scratch().capacity(), std::string().capacity());  // given back
}

TEST(ThreadScratch, EachTagHasItsOwnBuffer) {
  threadScratch<TagA>() = "answer head";
  threadScratch<TagB>() = "request head";
  EXPECT_EQ(threadScratch<TagA>(), "answer head");
  EXPECT_NE(&threadScratch<TagA>(), &threadScratch<TagB>());
}

}  // namespace
}  // namespace relay
