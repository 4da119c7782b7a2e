#include "relay/common/headers.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace relay {
namespace {

std::vector<std::pair<std::string, std::string>> fieldsOf(const Headers& h) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const HeaderField& f : h)
    out.emplace_back(f.name, f.value);
  return out;
}

// Names are lowercased a word at a time, with a last word that may overlap
// the one before: every byte value, at every position of every length up to
// three words (among capitals, which the overlap lowercases twice),
// lowercases as a byte loop would.
TEST(Headers, LowercasesEveryAsciiLetterAndNothingElse) {
  for (int byte = 0; byte < 256; ++byte) {
    for (std::size_t length = 1; length <= 24; ++length) {
      for (std::size_t at = 0; at < length; ++at) {
        std::string name(length, 'X');
        name[at] = static_cast<char>(byte);
        Headers h;
        h.add(name, "v");
        const char expected =
            (byte >= 'A' && byte <= 'Z') ? static_cast<char>(byte + 32) : static_cast<char>(byte);
        const std::string_view stored = (*h.begin()).name;
        ASSERT_EQ(stored.size(), length);
        ASSERT_EQ(stored[at], expected) << "byte " << byte << " at " << at << " of " << length;
        for (std::size_t i = 0; i < length; ++i)
          if (i != at) ASSERT_EQ(stored[i], 'x');
      }
    }
  }
  Headers h;
  h.add("X-RateLimit-Remaining-Requests", "Keeps Its Case");
  EXPECT_EQ(h.get("x-ratelimit-remaining-requests"), "Keeps Its Case");
}

TEST(Headers, KeepsOrderDuplicatesAndFindsTheFirst) {
  Headers h;
  h.add("Accept", "a");
  h.add("tracestate", "x=1");
  h.add("tracestate", "y=2");
  EXPECT_EQ(fieldsOf(h), (std::vector<std::pair<std::string, std::string>>{
                             {"accept", "a"}, {"tracestate", "x=1"}, {"tracestate", "y=2"}}));
  EXPECT_EQ(h.find("tracestate"), std::optional<std::string_view>("x=1"));
  EXPECT_EQ(h.find("trace"), std::nullopt);
  EXPECT_FALSE(h.contains("Accept"));  // lookups take lowercase names
  EXPECT_EQ(h.get("missing"), "");

  h.set("TraceState", "z=3");
  EXPECT_EQ(fieldsOf(h), (std::vector<std::pair<std::string, std::string>>{{"accept", "a"},
                                                                           {"tracestate", "z=3"}}));
  h.remove("ACCEPT");
  h.removeIf([](const HeaderField& f) { return f.value == "nothing"; });
  EXPECT_EQ(h.size(), 1u);
  Headers copy = h;
  h.add("later", "1");
  EXPECT_EQ(fieldsOf(copy),
            (std::vector<std::pair<std::string, std::string>>{{"tracestate", "z=3"}}));
}

// Names are compared a word at a time for 8 to 16 bytes (two words, the
// second ending at the last byte), with memcmp otherwise: a name that
// differs from the one asked for in any one byte, at any length, is not it,
// and the name itself is found after it.
TEST(Headers, FindsOnlyTheExactNameWhereverANeighbourDiffers) {
  for (std::size_t length = 1; length <= 40; ++length) {
    std::string name(length, 'a');
    for (std::size_t i = 0; i < length; ++i)
      name[i] = static_cast<char>('a' + (i * 7) % 26);
    for (std::size_t at = 0; at < length; ++at) {
      std::string neighbour = name;
      neighbour[at] = neighbour[at] == 'z' ? 'y' : static_cast<char>(neighbour[at] + 1);
      Headers h;
      h.add(neighbour, "neighbour");
      h.add(name + "x", "longer");
      h.add(name, "it");
      ASSERT_EQ(h.get(name), "it") << "length " << length << ", differing at " << at;
      ASSERT_EQ(h.get(neighbour), "neighbour");
      Headers without;
      without.add(neighbour, "neighbour");
      ASSERT_EQ(without.find(name), std::nullopt) << "length " << length << ", at " << at;
    }
  }
}

// Copies hold their own bytes; a moved-from Headers is empty and usable.
TEST(Headers, CopiesAndMovesKeepTheirFields) {
  Headers a;
  a.add("X-One", std::string(500, '1'));  // past the first buffer's 384 bytes
  a.add("two", "2");
  Headers copy(a);
  Headers assigned;
  assigned.add("old", "gone");
  assigned = a;
  a.set("two", "changed");
  EXPECT_EQ(copy.get("two"), "2");
  EXPECT_EQ(assigned.get("two"), "2");
  EXPECT_EQ(assigned.get("old"), "");
  EXPECT_EQ(copy.get("x-one"), std::string(500, '1'));
  copy.add("three", "3");  // a copy's buffer is exactly full: it grows
  EXPECT_EQ(copy.size(), 3u);

  Headers moved(std::move(a));
  EXPECT_EQ(moved.get("two"), "changed");
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  a.add("again", "yes");
  EXPECT_EQ(a.get("again"), "yes");
  Headers empty;
  Headers emptyCopy(empty);
  EXPECT_TRUE(emptyCopy.empty());
  emptyCopy.add("", "");
  EXPECT_EQ(emptyCopy.size(), 1u);
}

// A field added from views of the same Headers survives the buffer moving
// (the views would dangle), and set() may take the value of the field it
// replaces.
TEST(Headers, AddsFromItsOwnFieldsWhileGrowing) {
  Headers h;
  const std::string big(300, 'v');
  h.add("first", big);
  for (int i = 0; i < 20; ++i) {
    const HeaderField f = *h.begin();
    h.add(f.name, f.value);  // grows past the first buffer more than once
  }
  ASSERT_EQ(h.size(), 21u);
  for (const HeaderField& f : h) {
    EXPECT_EQ(f.name, "first");
    EXPECT_EQ(f.value, big);
  }
  h.set("first", h.get("first"));
  EXPECT_EQ(fieldsOf(h), (std::vector<std::pair<std::string, std::string>>{{"first", big}}));
}

// The index and the text share one block and grow apart: many short fields
// outgrow the index before the text, one long one the text before the index.
// Every field stays in order through each growth, after removals, and in a
// copy (which holds just what is in use).
TEST(Headers, HoldsManyFieldsThroughEachGrowth) {
  Headers h;
  std::vector<std::pair<std::string, std::string>> expected;
  for (int i = 0; i < 100; ++i) {
    expected.emplace_back("f" + std::to_string(i), "v" + std::to_string(i));
    h.add(expected.back().first, expected.back().second);
    if (i == 40) {
      expected.emplace_back("long", std::string(2000, 'l'));
      h.add("Long", expected.back().second);
    }
  }
  ASSERT_EQ(fieldsOf(h), expected);
  for (const auto& [name, value] : expected)
    ASSERT_EQ(h.get(name), value);
  h.removeIf([](const HeaderField& f) { return f.name.size() == 3 && f.name[1] == '5'; });
  std::erase_if(expected, [](const auto& f) { return f.first.size() == 3 && f.first[1] == '5'; });
  Headers copy(h);
  ASSERT_EQ(fieldsOf(copy), expected);
  copy.add("after", "copy");
  EXPECT_EQ(copy.get("after"), "copy");
  EXPECT_EQ(copy.get("f99"), "v99");

  Headers reserved;
  reserved.reserve(3, 10);
  reserved.add("a", "1");
  reserved.reserve(2);  // never shrinks
  reserved.add("b", "2");
  reserved.add("c", "3");
  reserved.add("d", std::string(100, '4'));
  EXPECT_EQ(fieldsOf(reserved),
            (std::vector<std::pair<std::string, std::string>>{
                {"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", std::string(100, '4')}}));
}

// reserve(fields) makes room for the text too: a head of that many short
// fields is built without the block moving (a view of the first stays put).
TEST(Headers, ReservedRoomHoldsAHeadWithoutMoving) {
  Headers h;
  h.reserve(16);
  h.add("x-request-id", "req_0123456789abcdef01234567");
  const char* first = (*h.begin()).value.data();
  for (int i = 1; i < 16; ++i)
    h.add("x-ratelimit-field-" + std::to_string(i), std::to_string(i * 1000));
  EXPECT_EQ((*h.begin()).value.data(), first);
  h.add("one-more", "field");  // past the reservation: the block moves
  EXPECT_NE((*h.begin()).value.data(), first);
  EXPECT_EQ(h.get("x-request-id"), "req_0123456789abcdef01234567");
}

}  // namespace
}  // namespace relay
