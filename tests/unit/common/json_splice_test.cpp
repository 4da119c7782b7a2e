#include "relay/common/json_splice.hpp"

#include <functional>
#include <string>

#include <gtest/gtest.h>

namespace relay {
namespace {

TEST(JsonSplice, WithoutEditsCopiesTheSource) {
  const std::string_view source = R"({ "a" : 1 })";
  const JsonSplice splice(source);
  EXPECT_EQ(splice.build(), source);
  EXPECT_EQ(splice.resultSize(), source.size());
}

TEST(JsonSplice, AppliesEditsInOffsetOrderWhateverTheOrderAdded) {
  const std::string_view source = "0123456789";
  JsonSplice splice(source);
  ASSERT_TRUE(splice.replace({7, 2}, "xyz"));  // 78 -> xyz
  ASSERT_TRUE(splice.erase({1, 2}));           // drop 12
  ASSERT_TRUE(splice.insert(5, "<"));          // before 5
  ASSERT_TRUE(splice.insert(10, "!"));         // at the end
  ASSERT_TRUE(splice.insert(0, "^"));          // at the start
  EXPECT_EQ(splice.build(), "^034<56xyz9!");
  EXPECT_EQ(splice.resultSize(), splice.build().size());
  std::string out = "prefix:";
  splice.appendTo(out);
  EXPECT_EQ(out, "prefix:^034<56xyz9!");
}

TEST(JsonSplice, InsertsAtOneOffsetKeepTheirOrderAndPrecedeAReplacement) {
  JsonSplice splice("abc");
  ASSERT_TRUE(splice.replace({1, 1}, "B"));
  ASSERT_TRUE(splice.insert(1, "1"));
  ASSERT_TRUE(splice.insert(1, "2"));
  ASSERT_TRUE(splice.insert(2, "3"));  // at the replaced range's end: allowed
  EXPECT_EQ(splice.build(), "a12B3c");
}

TEST(JsonSplice, RefusesOverlapsOutOfRangeEditsAndOverflow) {
  JsonSplice splice("0123456789");
  ASSERT_TRUE(splice.replace({2, 4}, "x"));
  EXPECT_FALSE(splice.replace({5, 2}, "y"));  // overlaps the end
  EXPECT_FALSE(splice.replace({0, 3}, "y"));  // overlaps the start
  EXPECT_FALSE(splice.replace({2, 1}, "y"));  // same start
  EXPECT_FALSE(splice.insert(3, "y"));        // inside
  EXPECT_FALSE(splice.replace({9, 2}, "y"));  // past the end
  EXPECT_FALSE(splice.insert(11, "y"));
  EXPECT_EQ(splice.editCount(), 1U);
  EXPECT_EQ(splice.build(), "01x6789");

  JsonSplice full("x");
  for (std::size_t i = 0; i < JsonSplice::kMaxEdits; ++i)
    ASSERT_TRUE(full.insert(1, "."));
  EXPECT_FALSE(full.insert(0, "."));
  EXPECT_EQ(full.build(), "x" + std::string(JsonSplice::kMaxEdits, '.'));
}

class MemberEdits : public testing::Test {
 protected:
  std::string edit(
      std::string_view text,
      const std::function<bool(JsonSplice&, JsonSpan, const std::vector<JsonMember>&)>& f) {
    std::vector<JsonMember> members;
    EXPECT_FALSE(scanObject(text, members));
    const std::size_t open = text.find('{');
    JsonSplice splice(text);
    EXPECT_TRUE(f(splice, {open, text.rfind('}') + 1 - open}, members));
    std::string out = splice.build();
    EXPECT_FALSE(validateJson(out)) << out;
    return out;
  }
  std::string add(std::string_view text, std::string_view member) {
    return edit(text, [&](JsonSplice& s, JsonSpan object, const std::vector<JsonMember>& m) {
      return addMember(s, object, m, member);
    });
  }
  std::string remove(std::string_view text, std::size_t index) {
    return edit(text, [&](JsonSplice& s, JsonSpan, const std::vector<JsonMember>& m) {
      return removeMember(s, m, index);
    });
  }
};

TEST_F(MemberEdits, AddMemberGoesAfterTheLastValueOrInsideAnEmptyObject) {
  EXPECT_EQ(add(R"({"a":1})", R"("b":2)"), R"({"a":1,"b":2})");
  EXPECT_EQ(add("{ \"a\" : [1] \n}", R"("b":2)"), "{ \"a\" : [1],\"b\":2 \n}");
  EXPECT_EQ(add("{}", R"("b":2)"), R"({"b":2})");
  EXPECT_EQ(add(" { \n } ", R"("b":2)"), " {\"b\":2 \n } ");
}

TEST_F(MemberEdits, RemoveMemberTakesExactlyOneComma) {
  const std::string_view text = R"({"a":1, "b":{"x":2} ,"c":3})";
  EXPECT_EQ(remove(text, 0), R"({"b":{"x":2} ,"c":3})");
  EXPECT_EQ(remove(text, 1), R"({"a":1, "c":3})");
  EXPECT_EQ(remove(text, 2), R"({"a":1, "b":{"x":2}})");
  EXPECT_EQ(remove(R"({ "only":true })", 0), "{  }");
}

}  // namespace
}  // namespace relay
