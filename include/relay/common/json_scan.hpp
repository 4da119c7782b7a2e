// A strict, allocation-light JSON scanner for the request path.
//
// The gateway never builds a DOM of a request body: it validates the bytes once
// (RFC 8259, strictly), records where the top-level members sit, reads the few
// fields it routes and admits on, and splices the forwarded body (see
// json_splice.hpp). Every span is a byte range of the caller's text, so nothing
// here copies a value unless the caller asks for it (unescapeString).
//
// Strictness, beyond the RFC grammar: strings must be valid UTF-8 (no overlong
// forms, no encoded surrogates, nothing above U+10FFFF), \u escapes must not
// leave a surrogate unpaired, nesting is limited (JsonLimits), and a byte order
// mark is refused. The same text is therefore read identically by any
// conforming upstream parser — except for duplicate keys, which the RFC allows
// and the callers that care about them detect (see chat_request.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace relay {

enum class JsonType : std::uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };

std::string_view jsonTypeName(JsonType type);

// What is wrong and where: `offset` is the byte offset, in the text given to the
// scanning function, of the byte that broke the grammar (the text's size for a
// premature end). `message` says what was expected and what was found.
struct JsonError {
  std::size_t offset = 0;
  std::string message;

  // "at byte 17: expected ':' after an object key, found '}'"
  std::string describe() const;
};

// A byte range [offset, offset + length) of the scanned text.
struct JsonSpan {
  std::size_t offset = 0;
  std::size_t length = 0;

  std::size_t end() const { return offset + length; }
  std::string_view in(std::string_view text) const { return text.substr(offset, length); }
  friend bool operator==(const JsonSpan&, const JsonSpan&) = default;
};

// One value: its type and exact bytes (a string's span includes its quotes).
// `stringBytes` counts the raw bytes inside every string value nested in it
// (object keys excluded): a cheap proxy for the amount of text it carries.
struct JsonValue {
  JsonType type = JsonType::kNull;
  JsonSpan span;
  std::size_t stringBytes = 0;
};

// One member of an object. `rawKey` is the key's bytes between its quotes with
// any escapes left in place (`keyEscaped` says whether there are any); compare
// keys with keyEquals(), which decodes escapes, so that "mod\u0065l" is "model".
struct JsonMember {
  std::string_view rawKey;
  bool keyEscaped = false;
  std::size_t keyOffset = 0;  // offset of the key's opening quote
  JsonValue value;

  // The whole member, from the key's opening quote to the end of the value.
  JsonSpan span() const { return {keyOffset, value.span.end() - keyOffset}; }
};

struct JsonLimits {
  // Containers may nest this deep (a top-level object is depth 1). Values
  // above kMaxDepthCap are clamped to it.
  std::size_t maxDepth = 128;
  static constexpr std::size_t kMaxDepthCap = 1024;
};

// Past the JSON whitespace (space, tab, CR, LF) at `p`, reading no further
// than `end`. Compact JSON, what SDKs and providers send, has none: one
// compare says so, since every whitespace byte is at or below ' '.
inline const char* skipJsonWhitespace(const char* p, const char* end) {
  if (p == end || static_cast<unsigned char>(*p) > ' ') return p;
  while (p != end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
    ++p;
  return p;
}

// Validates `text` as one complete JSON text: optional whitespace, one value,
// optional whitespace, nothing else.
std::optional<JsonError> validateJson(std::string_view text, const JsonLimits& limits = {});

// Validates `text` as a JSON text whose value is an object and, in the same
// pass, fills `members` (cleared first) with its top-level members in order.
// Spans are offsets in `text`. Reusing one vector per worker avoids allocating.
std::optional<JsonError> scanObject(std::string_view text, std::vector<JsonMember>& members,
                                    const JsonLimits& limits = {});

// The same for the object at `object` inside `text` (a span produced by an
// earlier scan). Only that range is read and validated; spans and error offsets
// stay offsets in `text`.
std::optional<JsonError> scanObject(std::string_view text, JsonSpan object,
                                    std::vector<JsonMember>& members,
                                    const JsonLimits& limits = {});

// Validates the array at `array` inside `text` and fills `elements` (cleared
// first) with its elements in order.
std::optional<JsonError> scanArray(std::string_view text, JsonSpan array,
                                   std::vector<JsonValue>& elements, const JsonLimits& limits = {});

// True when the member's decoded key equals `key` (compared byte for byte).
bool keyEquals(const JsonMember& member, std::string_view key);

// The first member whose decoded key is `key`, or nullptr.
const JsonMember* findMember(const std::vector<JsonMember>& members, std::string_view key);

// How many members have the decoded key `key` (duplicates are legal JSON).
std::size_t countMembers(const std::vector<JsonMember>& members, std::string_view key);

// The bytes between a string value's quotes (`quoted` must be a validated
// string value, quotes included). No escapes are decoded.
std::string_view stringContent(std::string_view quoted);

// Appends the decoded text of a validated string value (quotes included) to
// `out`. \u escapes become UTF-8; a surrogate pair becomes one code point.
void unescapeString(std::string_view quoted, std::string& out);

// A validated number token as an integer: plain integer syntax only (no
// fraction or exponent, "-0" is 0), nullopt otherwise or on overflow.
std::optional<std::int64_t> parseInt(std::string_view token);

// `true` / `false` as a bool; nullopt for anything else.
std::optional<bool> parseBool(std::string_view token);

}  // namespace relay
