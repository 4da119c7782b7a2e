// HeadWriter (relay/common/head_writer.hpp): fields and raw pieces written
// after what the string held, the string cut to what was written, and a
// bound that is exact, too small or zero never writes past the string.
#include "relay/common/head_writer.hpp"

#include <string>

#include <gtest/gtest.h>

namespace relay {
namespace {

TEST(HeadWriter, WritesFieldsAfterWhatTheStringHeldAndCutsToWhatWasWritten) {
  const std::string expected =
      "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-raw: 1\r\nx-empty: \r\n";
  std::string out = "HTTP/1.1 200 OK\r\n";
  {
    HeadWriter w(out, 512);
    w.field("content-type", "application/json").raw("x-raw: 1\r\n").field("x-empty", "");
    EXPECT_EQ(w.written(), expected.size());
    EXPECT_EQ(out.size(), 17u + 512u);  // sized once, cut at the end
  }                                     // the destructor finishes
  EXPECT_EQ(out, expected);
}

TEST(HeadWriter, AnExactBoundIsNotGrownAndOneByteMoreIs) {
  const std::string line = "host: a\r\n";  // 9 bytes
  std::string out;
  out.reserve(64);
  HeadWriter w(out, 2 * line.size());
  const char* const before = out.data();
  const std::size_t size = out.size();
  w.field("host", "a").field("host", "a");  // exactly the bound
  EXPECT_EQ(out.size(), size) << "grown though the bound was enough";
  EXPECT_EQ(out.data(), before);
  w.raw("!");  // one byte past it: grown first, not written past the end
  EXPECT_GT(out.size(), size);
  w.finish();
  EXPECT_EQ(out, line + line + "!");
  w.finish();  // a second finish changes nothing
  EXPECT_EQ(out, line + line + "!");
}

TEST(HeadWriter, AZeroOrTooSmallBoundStillWritesEverything) {
  for (std::size_t bound : {std::size_t{0}, std::size_t{1}, std::size_t{7}}) {
    std::string out = "start\r\n";
    std::string expected = out;
    {
      HeadWriter w(out, bound);
      for (int i = 0; i < 100; ++i) {
        const std::string value(static_cast<std::size_t>(i), 'v');
        w.field("x-field", value);
        expected += "x-field: " + value + "\r\n";
      }
      w.raw("\r\n");
      expected += "\r\n";
    }
    EXPECT_EQ(out, expected) << "bound " << bound;
  }
}

TEST(HeadWriter, EmptyPiecesWriteNothing) {
  std::string out;
  {
    HeadWriter w(out, 0);
    w.raw("").raw(std::string_view()).field("", "");
  }
  EXPECT_EQ(out, ": \r\n");
}

}  // namespace
}  // namespace relay
