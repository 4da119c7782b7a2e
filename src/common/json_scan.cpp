// The validating scanner behind json_scan.hpp: one pass, no recursion, no
// allocation except the caller's member/element vector and an error message.
#include "relay/common/json_scan.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "relay/common/utf8.hpp"

namespace relay {

namespace {

constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
constexpr std::uint64_t kHighs = 0x8080808080808080ULL;

// Flags each byte of `x` that a string scan must stop at: '"', '\\', a control
// character or a non-ASCII byte. Borrows only run towards higher bytes, so the
// lowest flagged byte is always a true hit (higher flags may be false ones).
inline std::uint64_t stringStopBytes(std::uint64_t x) {
  const std::uint64_t quote = x ^ (kOnes * '"');
  const std::uint64_t slash = x ^ (kOnes * '\\');
  const std::uint64_t control = (x - kOnes * 0x20) & ~x;
  return (((quote - kOnes) & ~quote) | ((slash - kOnes) & ~slash) | control | x) & kHighs;
}

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string describeByteAt(const char* p, const char* end) {
  if (p >= end) return "end of input";
  const auto byte = static_cast<unsigned char>(*p);
  if (byte >= 0x21 && byte < 0x7f) return std::string("'") + *p + "'";
  static constexpr char kHex[] = "0123456789ABCDEF";
  return std::string("byte 0x") + kHex[byte >> 4] + kHex[byte & 15];
}

enum class Root { kAny, kObject, kArray };

// Scans [begin, end) of `text`. Depth 1 is the root container; its children
// are recorded into `members` or `elements` as they complete.
class Scanner {
 public:
  Scanner(std::string_view text, std::size_t begin, std::size_t end, const JsonLimits& limits)
      : base_(text.data()),
        p_(text.data() + begin),
        end_(text.data() + end),
        maxDepth_(std::min(limits.maxDepth, JsonLimits::kMaxDepthCap)) {}

  std::optional<JsonError> run(Root root, std::vector<JsonMember>* members,
                               std::vector<JsonValue>* elements);

 private:
  enum class State { kValue, kKey, kAfterValue };

  std::size_t offset(const char* p) const { return static_cast<std::size_t>(p - base_); }
  bool topIsObject() const { return (kinds_[(depth_ - 1) / 64] >> ((depth_ - 1) % 64)) & 1U; }

  void skipWhitespace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t'))
      ++p_;
  }

  bool fail(const char* at, std::string message) {
    error_ = JsonError{offset(at), std::move(message)};
    return false;
  }
  bool failExpected(const char* what) {
    return fail(p_, std::string("expected ") + what + ", found " + describeByteAt(p_, end_));
  }

  bool push(bool isObject);
  bool scanString(bool& escaped);
  bool scanEscape();
  bool scanNumber();
  bool scanLiteral();

  const char* base_;
  const char* p_;
  const char* end_;
  std::size_t maxDepth_;
  std::size_t depth_ = 0;
  std::uint64_t kinds_[JsonLimits::kMaxDepthCap / 64] = {};  // bit set: that level is an object
  std::size_t stringBytes_ = 0;                              // running total, keys excluded
  std::optional<JsonError> error_;
};

bool Scanner::push(bool isObject) {
  if (depth_ >= maxDepth_) {
    return fail(p_, "nesting deeper than " + std::to_string(maxDepth_) + " levels");
  }
  std::uint64_t& word = kinds_[depth_ / 64];
  const std::uint64_t bit = std::uint64_t{1} << (depth_ % 64);
  word = isObject ? (word | bit) : (word & ~bit);
  ++depth_;
  ++p_;
  return true;
}

bool Scanner::scanString(bool& escaped) {
  const char* open = p_++;  // at the opening quote
  escaped = false;
  for (;;) {
    if constexpr (std::endian::native == std::endian::little) {
      while (end_ - p_ >= 8) {
        std::uint64_t word;
        std::memcpy(&word, p_, 8);
        const std::uint64_t stops = stringStopBytes(word);
        if (stops != 0) {
          p_ += std::countr_zero(stops) / 8;
          break;
        }
        p_ += 8;
      }
    }
    if (p_ == end_)
      return fail(p_, "unterminated string (opened at byte " + std::to_string(offset(open)) +
                          "), expected '\"'");
    const auto c = static_cast<unsigned char>(*p_);
    if (c == '"') {
      ++p_;
      return true;
    }
    if (c == '\\') {
      escaped = true;
      if (!scanEscape()) return false;
    } else if (c < 0x20) {
      return fail(p_, "control character " + describeByteAt(p_, end_).substr(5) +
                          " in a string (it must be escaped)");
    } else if (c < 0x80) {
      ++p_;
    } else {
      const std::size_t length = utf8::sequenceLength(reinterpret_cast<const unsigned char*>(p_),
                                                      reinterpret_cast<const unsigned char*>(end_));
      if (length == 0) return fail(p_, "invalid UTF-8 sequence in a string");
      p_ += length;
    }
  }
}

// At a backslash inside a string; leaves p_ after the escape sequence.
bool Scanner::scanEscape() {
  const char* backslash = p_++;
  if (p_ == end_) return failExpected("an escape character after '\\'");
  switch (*p_) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
      ++p_;
      return true;
    case 'u':
      break;
    default:
      return fail(backslash, std::string("invalid escape '\\") + *p_ + "' in a string");
  }
  auto readHex4 = [this](unsigned& unit) {
    ++p_;  // past 'u'
    unit = 0;
    for (int i = 0; i < 4; ++i, ++p_) {
      const int digit = p_ == end_ ? -1 : hexValue(*p_);
      if (digit < 0) return failExpected("4 hex digits after '\\u'");
      unit = unit * 16 + static_cast<unsigned>(digit);
    }
    return true;
  };
  unsigned unit = 0;
  if (!readHex4(unit)) return false;
  const std::string shown(backslash, 6);
  if (unit >= 0xDC00 && unit <= 0xDFFF) {
    return fail(backslash, "unpaired UTF-16 low surrogate " + shown);
  }
  if (unit >= 0xD800 && unit <= 0xDBFF) {
    if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
      return fail(backslash, "unpaired UTF-16 high surrogate " + shown +
                                 " (a \\uDC00-\\uDFFF escape must follow)");
    }
    ++p_;  // at 'u'
    unsigned low = 0;
    if (!readHex4(low)) return false;
    if (low < 0xDC00 || low > 0xDFFF) {
      return fail(backslash, "unpaired UTF-16 high surrogate " + shown +
                                 " (a \\uDC00-\\uDFFF escape must follow)");
    }
  }
  return true;
}

bool Scanner::scanNumber() {
  if (*p_ == '-') ++p_;
  if (p_ == end_ || !isDigit(*p_)) return failExpected("a digit");
  if (*p_ == '0') {
    ++p_;
    if (p_ != end_ && isDigit(*p_)) return fail(p_ - 1, "leading zeros are not allowed in numbers");
  } else {
    while (p_ != end_ && isDigit(*p_))
      ++p_;
  }
  if (p_ != end_ && *p_ == '.') {
    ++p_;
    if (p_ == end_ || !isDigit(*p_)) return failExpected("a digit after the decimal point");
    while (p_ != end_ && isDigit(*p_))
      ++p_;
  }
  if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
    ++p_;
    if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
    if (p_ == end_ || !isDigit(*p_)) return failExpected("a digit in the exponent");
    while (p_ != end_ && isDigit(*p_))
      ++p_;
  }
  return true;
}

bool Scanner::scanLiteral() {
  const std::string_view rest(p_, static_cast<std::size_t>(end_ - p_));
  for (std::string_view word : {"true", "false", "null"}) {
    if (word[0] == *p_) {
      if (rest.substr(0, word.size()) != word) {
        return fail(p_, "invalid literal, expected '" + std::string(word) + "'");
      }
      p_ += word.size();
      return true;
    }
  }
  return failExpected("a JSON value");
}

std::optional<JsonError> Scanner::run(Root root, std::vector<JsonMember>* members,
                                      std::vector<JsonValue>* elements) {
  skipWhitespace();
  if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) {
    fail(p_, "a byte order mark is not allowed before JSON text");
    return error_;
  }
  if (root == Root::kObject && (p_ == end_ || *p_ != '{')) {
    failExpected("'{' (a JSON object)");
    return error_;
  }
  if (root == Root::kArray && (p_ == end_ || *p_ != '[')) {
    failExpected("'[' (a JSON array)");
    return error_;
  }
  JsonMember member;  // the root object's member being scanned
  JsonValue child;    // the root container's child being scanned
  std::size_t childStringBytes = 0;
  State state = State::kValue;
  for (;;) {
    switch (state) {
      case State::kValue: {
        skipWhitespace();
        if (p_ == end_) {
          failExpected("a JSON value");
          return error_;
        }
        const bool isChild = depth_ == 1;  // checked before a container descends
        if (isChild) {
          child.span.offset = offset(p_);
          childStringBytes = stringBytes_;
        }
        const char c = *p_;
        JsonType type = JsonType::kNull;
        bool ok = true;
        state = State::kAfterValue;
        if (c == '{' || c == '[') {
          const bool isObject = c == '{';
          type = isObject ? JsonType::kObject : JsonType::kArray;
          ok = push(isObject);
          if (ok) {
            skipWhitespace();
            if (p_ != end_ && *p_ == (isObject ? '}' : ']')) {
              ++p_;
              --depth_;
            } else {
              state = isObject ? State::kKey : State::kValue;
            }
          }
        } else if (c == '"') {
          type = JsonType::kString;
          const char* start = p_;
          bool escaped = false;
          ok = scanString(escaped);
          stringBytes_ += static_cast<std::size_t>(p_ - start) - 2;
        } else if (c == '-' || isDigit(c)) {
          type = JsonType::kNumber;
          ok = scanNumber();
        } else {
          type = c == 'n' ? JsonType::kNull : JsonType::kBool;
          ok = scanLiteral();
        }
        if (!ok) return error_;
        if (isChild) child.type = type;
        break;
      }
      case State::kKey: {
        skipWhitespace();
        if (p_ == end_ || *p_ != '"') {
          failExpected("'\"' to begin an object key");
          return error_;
        }
        const char* keyStart = p_;
        bool escaped = false;
        if (!scanString(escaped)) return error_;
        if (depth_ == 1) {
          member.keyOffset = offset(keyStart);
          member.rawKey =
              std::string_view(keyStart + 1, static_cast<std::size_t>(p_ - keyStart) - 2);
          member.keyEscaped = escaped;
        }
        skipWhitespace();
        if (p_ == end_ || *p_ != ':') {
          failExpected("':' after an object key");
          return error_;
        }
        ++p_;
        state = State::kValue;
        break;
      }
      case State::kAfterValue: {
        if (depth_ == 1) {  // a child of the root container just ended
          child.span.length = offset(p_) - child.span.offset;
          child.stringBytes = stringBytes_ - childStringBytes;
          if (topIsObject() && members) {
            member.value = child;
            members->push_back(member);
          } else if (!topIsObject() && elements) {
            elements->push_back(child);
          }
        }
        if (depth_ == 0) {
          skipWhitespace();
          if (p_ != end_) {
            failExpected("end of input after the JSON value");
            return error_;
          }
          return std::nullopt;
        }
        skipWhitespace();
        const bool isObject = topIsObject();
        if (p_ != end_ && *p_ == ',') {
          ++p_;
          state = isObject ? State::kKey : State::kValue;
        } else if (p_ != end_ && *p_ == (isObject ? '}' : ']')) {
          ++p_;
          --depth_;
        } else {
          failExpected(isObject ? "',' or '}' after an object member"
                                : "',' or ']' after an array element");
          return error_;
        }
        break;
      }
    }
  }
}

}  // namespace

std::optional<JsonError> validateJson(std::string_view text, const JsonLimits& limits) {
  return Scanner(text, 0, text.size(), limits).run(Root::kAny, nullptr, nullptr);
}

std::optional<JsonError> scanObject(std::string_view text, std::vector<JsonMember>& members,
                                    const JsonLimits& limits) {
  members.clear();
  return Scanner(text, 0, text.size(), limits).run(Root::kObject, &members, nullptr);
}

std::optional<JsonError> scanObject(std::string_view text, JsonSpan object,
                                    std::vector<JsonMember>& members, const JsonLimits& limits) {
  members.clear();
  if (object.offset > text.size() || object.length > text.size() - object.offset) {
    return JsonError{text.size(), "object span lies outside the text"};
  }
  return Scanner(text, object.offset, object.end(), limits).run(Root::kObject, &members, nullptr);
}

std::optional<JsonError> scanArray(std::string_view text, JsonSpan array,
                                   std::vector<JsonValue>& elements, const JsonLimits& limits) {
  elements.clear();
  if (array.offset > text.size() || array.length > text.size() - array.offset) {
    return JsonError{text.size(), "array span lies outside the text"};
  }
  return Scanner(text, array.offset, array.end(), limits).run(Root::kArray, nullptr, &elements);
}

}  // namespace relay
