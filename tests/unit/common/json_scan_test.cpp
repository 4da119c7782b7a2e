#include "relay/common/json_scan.hpp"

#include <string>

#include <gtest/gtest.h>

namespace relay {
namespace {

// Expects `text` to be refused at `offset` with a message containing `what`.
void expectError(std::string_view text, std::size_t offset, std::string_view what) {
  SCOPED_TRACE(testing::Message() << "input: " << text);
  const std::optional<JsonError> error = validateJson(text);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->offset, offset) << error->message;
  EXPECT_NE(error->message.find(what), std::string::npos) << error->message;
}

void expectValid(std::string_view text) {
  const std::optional<JsonError> error = validateJson(text);
  EXPECT_FALSE(error.has_value()) << text << ": " << (error ? error->describe() : "");
}

std::string unescaped(std::string_view quoted) {
  std::string out;
  unescapeString(quoted, out);
  return out;
}

// The one-compare exit must not take a byte at or below ' ' that is not
// whitespace, nor stop on one that is.
TEST(JsonWhitespace, SkipsTheFourKindsAndNothingElse) {
  const std::string_view spaced = " \t\r\n{";
  EXPECT_EQ(skipJsonWhitespace(spaced.data(), spaced.data() + spaced.size()), spaced.data() + 4);
  EXPECT_EQ(skipJsonWhitespace(spaced.data(), spaced.data() + 2), spaced.data() + 2);  // the end
  for (int byte = 0; byte < 256; ++byte) {
    const char c = static_cast<char>(byte);
    const bool ws = c == ' ' || c == '\t' || c == '\r' || c == '\n';
    EXPECT_EQ(skipJsonWhitespace(&c, &c + 1), &c + (ws ? 1 : 0)) << "byte " << byte;
  }
}

TEST(JsonValidate, AcceptsEveryKindOfValueAtTheTop) {
  for (std::string_view text : {"{}", "[]", "0", "\"\"", "true", "false", "null", " \t\r\n{}\n ",
                                R"({"a":[1,{"b":null}],"c":"d"})", "[[[]],[{}]]"}) {
    expectValid(text);
  }
}

TEST(JsonValidate, AcceptsNumbersOfTheRfcGrammar) {
  for (std::string_view text : {"-0", "0", "1e5", "1E5", "1e+5", "1e-5", "-1.5e-3", "0.0",
                                "123456789012345678901234567890", "1.0E10", "-0.0e0"}) {
    expectValid(text);
  }
}

TEST(JsonValidate, RefusesNumbersOutsideTheGrammar) {
  expectError("01", 0, "leading zeros");
  expectError("-01", 1, "leading zeros");
  expectError("[00]", 1, "leading zeros");
  expectError("1.", 2, "a digit after the decimal point");
  expectError("1.e5", 2, "a digit after the decimal point");
  expectError(".5", 0, "expected a JSON value");
  expectError("+1", 0, "expected a JSON value");
  expectError("1e", 2, "a digit in the exponent");
  expectError("1e+", 3, "a digit in the exponent");
  expectError("-", 1, "expected a digit");
  expectError("--1", 1, "expected a digit");
  expectError("0x10", 1, "end of input after the JSON value");
  expectError("[1 2]", 3, "',' or ']' after an array element");
}

TEST(JsonValidate, AcceptsEveryEscape) {
  expectValid(R"("\"\\\/\b\f\n\r\t\u0041\u00e9\u00E9\u0000")");
  EXPECT_EQ(unescaped(R"("\"\\\/\b\f\n\r\t")"), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(unescaped(R"("\u0041\u00e9\u4e2d")"), "A\xC3\xA9\xE4\xB8\xAD");
  EXPECT_EQ(unescaped(R"("\u0000")"), std::string(1, '\0'));
  EXPECT_EQ(unescaped(R"("plain")"), "plain");
  EXPECT_EQ(unescaped(R"("a\nb\\c")"), "a\nb\\c");
}

TEST(JsonValidate, RefusesBadEscapesAndRawControlCharacters) {
  expectError(R"("\x")", 1, "invalid escape '\\x'");
  expectError(R"("\u12")", 5, "4 hex digits after '\\u'");
  expectError(R"("\u12G4")", 5, "4 hex digits");
  expectError("\"a\nb\"", 2, "control character 0x0A");
  expectError("\"a\tb\"", 2, "control character 0x09");
  expectError(std::string_view("\"a\0b\"", 5), 2, "control character 0x00");
  expectError("\"abc", 4, "unterminated string");
  expectError("\"abc\\", 5, "an escape character");
}

TEST(JsonValidate, PairsSurrogateEscapes) {
  expectValid(R"("\uD83D\uDE00")");
  expectValid(R"("\ud83d\ude00")");
  EXPECT_EQ(unescaped(R"("\uD83D\uDE00!")"), "\xF0\x9F\x98\x80!");
  EXPECT_EQ(unescaped(R"("\uDBFF\uDFFF")"), "\xF4\x8F\xBF\xBF");  // U+10FFFF
  expectError(R"("\uD83D")", 1, "unpaired UTF-16 high surrogate");
  expectError(R"("x\uD83Dabcdef")", 2, "unpaired UTF-16 high surrogate");
  expectError(R"("\uD83D\u0041")", 1, "unpaired UTF-16 high surrogate");
  expectError(R"("\uD83D\uD83D")", 1, "unpaired UTF-16 high surrogate");
  expectError(R"("\uDE00")", 1, "unpaired UTF-16 low surrogate");
  expectError(R"("\uD83D\uDE0")", 12, "4 hex digits");
}

TEST(JsonValidate, ChecksUtf8InStrings) {
  expectValid("\"caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF\"");
  expectError("\"a\x80\"", 2, "invalid UTF-8");             // lone continuation byte
  expectError("\"\xC0\xAF\"", 1, "invalid UTF-8");          // overlong '/'
  expectError("\"\xE0\x80\x80\"", 1, "invalid UTF-8");      // overlong NUL
  expectError("\"\xED\xA0\x80\"", 1, "invalid UTF-8");      // encoded surrogate
  expectError("\"\xF4\x90\x80\x80\"", 1, "invalid UTF-8");  // above U+10FFFF
  expectError("\"\xF5\x80\x80\x80\"", 1, "invalid UTF-8");
  expectError("\"\xE4\xB8\"", 1, "invalid UTF-8");         // truncated
  expectError("\"\xE4\xB8", 1, "invalid UTF-8");           // truncated at the end
  expectError("\"abcdefghij\xFF\"", 11, "invalid UTF-8");  // past the 8-byte fast path
  expectError("\xC3\xA9", 0, "byte 0xC3");                 // outside a string
}

TEST(JsonValidate, LongStringsTakeTheWordPathAndStillStopAtEveryByteKind) {
  const std::string filler(37, 'x');
  expectValid("\"" + filler + "\"");
  expectValid("\"" + filler + "\\n" + filler + "\xC3\xA9" + filler + "\"");
  expectError("\"" + filler + "\x01" + filler + "\"", 38, "control character 0x01");
  expectError("\"" + filler + "\x7F\x1F\"", 39, "control character 0x1F");  // DEL is allowed
  expectError("\"" + filler, 38, "unterminated string");
}

TEST(JsonValidate, EveryStopByteIsFoundAtEveryPlaceInALongString) {
  // The plain bytes of a string are skipped sixteen and eight at a time, then
  // one by one: each kind of byte that ends the skip, at each place of the
  // first blocks and with each length of what follows, is found where it is
  // (and the bytes before it are not misread), whichever loop meets it.
  for (std::size_t at = 0; at < 50; ++at) {
    for (std::size_t tail = 0; tail < 24; ++tail) {
      SCOPED_TRACE(testing::Message() << "at " << at << ", " << tail << " bytes after");
      const std::string before(at, 'x');
      const std::string after(tail, 'y');
      const std::size_t offset = 1 + at;  // past the opening quote
      expectValid("\"" + before + "\\n" + after + "\"");
      expectValid("\"" + before + "\xC3\xA9" + after + "\"");  // 0x80 and above: UTF-8
      expectValid("\"" + before + "\x7F" + after + "\"");      // DEL is a plain byte
      expectValid("[\"" + before + "\",\"" + after + "\"]");   // the quote ends the string
      expectError("\"" + before + "\x1F" + after + "\"", offset, "control character 0x1F");
      expectError("\"" + before + std::string(1, '\0') + after + "\"", offset,
                  "control character 0x00");
      expectError("\"" + before + "\xFF" + after + "\"", offset, "invalid UTF-8");
      expectError("\"" + before + "\\q" + after + "\"", offset, "invalid escape");
      expectError("\"" + before, offset, "unterminated string");
    }
  }
}

TEST(JsonValidate, ReportsStructuralMistakesWithTheirOffset) {
  expectError(R"({"a" 1})", 5, "expected ':' after an object key, found '1'");
  expectError(R"({"a":1,})", 7, "'\"' to begin an object key, found '}'");
  expectError(R"({a:1})", 1, "'\"' to begin an object key");
  expectError(R"({"a":1)", 6, "',' or '}' after an object member, found end of input");
  expectError(R"({"a":1]})", 6, "',' or '}' after an object member, found ']'");
  expectError("[1,]", 3, "expected a JSON value, found ']'");
  expectError("[", 1, "expected a JSON value, found end of input");
  expectError(R"({"a":1}x)", 7, "end of input after the JSON value, found 'x'");
  expectError("{} {}", 3, "end of input after the JSON value");
  expectError("", 0, "expected a JSON value, found end of input");
  expectError("   ", 3, "expected a JSON value");
  expectError("\xEF\xBB\xBF{}", 0, "byte order mark");
  expectError("tru", 0, "invalid literal, expected 'true'");
  expectError("[nul]", 1, "invalid literal, expected 'null'");
  expectError("True", 0, "expected a JSON value, found 'T'");
  expectError("\v{}", 0, "byte 0x0B");  // only space, tab, CR and LF are whitespace
}

TEST(JsonValidate, DescribeSaysWhereAndWhat) {
  const auto error = validateJson(R"({"model" "x"})");
  ASSERT_TRUE(error);
  EXPECT_EQ(error->describe(), "at byte 9: expected ':' after an object key, found '\"'");
}

TEST(JsonValidate, LimitsNestingDepth) {
  const auto nested = [](std::size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
  };
  expectValid(nested(128));
  expectError(nested(129), 128, "nesting deeper than 128 levels");
  std::string objects;
  for (int i = 0; i < 129; ++i)
    objects += R"({"a":)";
  objects += "1" + std::string(129, '}');
  expectError(objects, 128 * 5, "nesting deeper than 128");
  EXPECT_FALSE(validateJson(nested(3), JsonLimits{3}));
  EXPECT_TRUE(validateJson(nested(4), JsonLimits{3}));
  EXPECT_FALSE(validateJson(nested(1000), JsonLimits{5000}));  // clamped to the cap...
  EXPECT_TRUE(validateJson(nested(1025), JsonLimits{5000}));   // ...of 1024
}

TEST(JsonScanObject, ListsTopLevelMembersInOrderWithTheirSpans) {
  const std::string_view text =
      R"( {"model" : "kimi", "n":-1.5e3,"ok":true,"x":null,"a":[1,{"k":"v"}],"o":{"p":"qq"}} )";
  std::vector<JsonMember> members;
  ASSERT_FALSE(scanObject(text, members));
  ASSERT_EQ(members.size(), 6U);
  const struct {
    std::string_view key;
    JsonType type;
    std::string_view value;
    std::size_t stringBytes;
  } expected[] = {{"model", JsonType::kString, R"("kimi")", 4},
                  {"n", JsonType::kNumber, "-1.5e3", 0},
                  {"ok", JsonType::kBool, "true", 0},
                  {"x", JsonType::kNull, "null", 0},
                  {"a", JsonType::kArray, R"([1,{"k":"v"}])", 1},
                  {"o", JsonType::kObject, R"({"p":"qq"})", 2}};
  for (std::size_t i = 0; i < members.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(members[i].rawKey, expected[i].key);
    EXPECT_FALSE(members[i].keyEscaped);
    EXPECT_EQ(members[i].value.type, expected[i].type);
    EXPECT_EQ(members[i].value.span.in(text), expected[i].value);
    EXPECT_EQ(members[i].value.stringBytes, expected[i].stringBytes);
  }
  EXPECT_EQ(members[0].span().in(text), R"("model" : "kimi")");
  EXPECT_EQ(members[0].keyOffset, 2U);
}

TEST(JsonScanObject, DecodesEscapedKeysWhenComparing) {
  const std::string_view text = R"({"mod\u0065l":"a","model":"b","\u00e9":1})";
  std::vector<JsonMember> members;
  ASSERT_FALSE(scanObject(text, members));
  ASSERT_EQ(members.size(), 3U);
  EXPECT_TRUE(members[0].keyEscaped);
  EXPECT_EQ(members[0].rawKey, R"(mod\u0065l)");
  EXPECT_TRUE(keyEquals(members[0], "model"));
  EXPECT_FALSE(keyEquals(members[0], "mode"));
  EXPECT_TRUE(keyEquals(members[2], "\xC3\xA9"));
  EXPECT_EQ(findMember(members, "model"), &members[0]);
  EXPECT_EQ(countMembers(members, "model"), 2U);
  EXPECT_EQ(findMember(members, "absent"), nullptr);
}

TEST(JsonScanObject, RefusesOtherValuesAndInvalidText) {
  std::vector<JsonMember> members;
  auto error = scanObject("[1]", members);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->offset, 0U);
  EXPECT_NE(error->message.find("'{' (a JSON object)"), std::string::npos);
  error = scanObject(R"({"a":1,"b":tru})", members);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->offset, 11U);
  EXPECT_FALSE(scanObject(" {} ", members));
  EXPECT_TRUE(members.empty());
}

TEST(JsonScanObject, ScansANestedObjectWithOffsetsInTheWholeText) {
  const std::string_view text = R"({"so":{"include_usage":false, "x":[]},"z":1})";
  std::vector<JsonMember> top;
  ASSERT_FALSE(scanObject(text, top));
  std::vector<JsonMember> inner;
  ASSERT_FALSE(scanObject(text, top[0].value.span, inner));
  ASSERT_EQ(inner.size(), 2U);
  EXPECT_EQ(inner[0].rawKey, "include_usage");
  EXPECT_EQ(inner[0].value.span.offset, 23U);
  EXPECT_EQ(inner[0].value.span.in(text), "false");
  EXPECT_EQ(inner[1].value.span.in(text), "[]");
  // A span that is not an object, or lies outside the text, is refused.
  EXPECT_TRUE(scanObject(text, top[1].value.span, inner));
  EXPECT_TRUE(scanObject(text, JsonSpan{40, 10}, inner));
  // Errors inside a span are reported at their offset in the whole text.
  const std::string_view bad = R"(xx{"a":01}yy)";
  const auto error = scanObject(bad, JsonSpan{2, 8}, inner);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->offset, 7U);
}

TEST(JsonScanArray, ListsElements) {
  const std::string_view text = R"({"c":[ {"i":0}, "s" ,3 ,[]]})";
  std::vector<JsonMember> top;
  ASSERT_FALSE(scanObject(text, top));
  std::vector<JsonValue> elements;
  ASSERT_FALSE(scanArray(text, top[0].value.span, elements));
  ASSERT_EQ(elements.size(), 4U);
  EXPECT_EQ(elements[0].type, JsonType::kObject);
  EXPECT_EQ(elements[0].span.in(text), R"({"i":0})");
  EXPECT_EQ(elements[1].span.in(text), R"("s")");
  EXPECT_EQ(elements[1].stringBytes, 1U);
  EXPECT_EQ(elements[2].span.in(text), "3");
  EXPECT_EQ(elements[3].type, JsonType::kArray);
  ASSERT_FALSE(scanArray("[]", JsonSpan{0, 2}, elements));
  EXPECT_TRUE(elements.empty());
  EXPECT_TRUE(scanArray("{}", JsonSpan{0, 2}, elements));
}

TEST(JsonValues, ParsesIntegersOnly) {
  EXPECT_EQ(parseInt("0"), 0);
  EXPECT_EQ(parseInt("-0"), 0);
  EXPECT_EQ(parseInt("42"), 42);
  EXPECT_EQ(parseInt("-7"), -7);
  EXPECT_EQ(parseInt("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(parseInt("-9223372036854775808"), INT64_MIN);
  EXPECT_EQ(parseInt("9223372036854775808"), std::nullopt);
  EXPECT_EQ(parseInt("1.0"), std::nullopt);
  EXPECT_EQ(parseInt("1e5"), std::nullopt);
  EXPECT_EQ(parseInt("\"1\""), std::nullopt);
  EXPECT_EQ(parseInt(""), std::nullopt);
  EXPECT_EQ(parseInt("-"), std::nullopt);
  EXPECT_EQ(parseInt("+5"), std::nullopt);
  EXPECT_EQ(parseInt(" 5"), std::nullopt);
  EXPECT_EQ(parseInt("5 "), std::nullopt);
  EXPECT_EQ(parseInt("-9223372036854775809"), std::nullopt);
  EXPECT_EQ(parseInt("18446744073709551615"), std::nullopt);
  EXPECT_EQ(parseInt("18446744073709551616"), std::nullopt);
  EXPECT_EQ(parseInt("99999999999999999999999"), std::nullopt);
  EXPECT_EQ(parseInt("007"), 7);
}

TEST(JsonValues, ParsesBooleansAndStringContent) {
  EXPECT_EQ(parseBool("true"), true);
  EXPECT_EQ(parseBool("false"), false);
  EXPECT_EQ(parseBool("null"), std::nullopt);
  EXPECT_EQ(parseBool("\"true\""), std::nullopt);
  EXPECT_EQ(stringContent(R"("a\"b")"), R"(a\"b)");
  EXPECT_EQ(stringContent(R"("")"), "");
  EXPECT_EQ(jsonTypeName(JsonType::kArray), "array");
}

}  // namespace
}  // namespace relay
