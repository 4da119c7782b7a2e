// The validating scanner behind json_scan.hpp: one pass, no recursion, no
// allocation except the caller's member/element vector and an error message.
#include "relay/common/json_scan.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

// The first byte at or after `p` that a string scan must stop at ('"', '\\',
// a control character, a non-ASCII byte), or a place from which the caller
// goes on byte by byte (fewer than 8 bytes left; at once on a big-endian
// machine without SSE2): sixteen bytes at a time with SSE2 (every x86-64 has
// it), then eight in a word. The bytes before it are plain ASCII, valid as
// they are.
inline const char* skipPlainStringBytes(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (end - p >= 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // Signed, a byte of 0x80 or more is below 0x20 too: one compare finds
    // control characters and the start of UTF-8 sequences.
    const __m128i stops =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                     _mm_cmplt_epi8(x, space));
    const unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(stops));
    if (mask != 0) return p + std::countr_zero(mask);
    p += 16;
  }
#endif
  if constexpr (std::endian::native == std::endian::little) {
    while (end - p >= 8) {
      std::uint64_t word;
      std::memcpy(&word, p, 8);
      const std::uint64_t stops = stringStopBytes(word);
      if (stops != 0) return p + std::countr_zero(stops) / 8;
      p += 8;
    }
  }
  return p;
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
  // What the scan expects next; kEnd once the root value and trailing
  // whitespace were consumed.
  enum class State { kValue, kKey, kAfterValue, kEnd };

  std::size_t offset(const char* p) const { return static_cast<std::size_t>(p - base_); }
  bool topIsObject() const { return (kinds_[(depth_ - 1) / 64] >> ((depth_ - 1) % 64)) & 1U; }

  void skipWhitespace() { p_ = skipJsonWhitespace(p_, end_); }

  bool fail(const char* at, std::string message) {
    error_ = JsonError{offset(at), std::move(message)};
    return false;
  }
  bool failExpected(const char* what) {
    return fail(p_, std::string("expected ") + what + ", found " + describeByteAt(p_, end_));
  }

  // The steps of run(): each consumes one token (or fails, leaving error_ set)
  // and sets `state` to what may follow.
  bool startRoot(Root root);
  bool stepValue(State& state);
  bool stepKey(State& state);
  bool stepAfterValue(State& state);
  void recordRootChild();

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

  // The root container's child being scanned (depth 1), and where it goes.
  std::vector<JsonMember>* members_ = nullptr;
  std::vector<JsonValue>* elements_ = nullptr;
  JsonMember member_;                 // the root object's member being scanned
  JsonValue child_;                   // the root container's child being scanned
  std::size_t childStringBytes_ = 0;  // stringBytes_ when the child began
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
    p_ = skipPlainStringBytes(p_, end_);
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

// A push-down scan without recursion: the container stack is the bit set
// kinds_, and each step below consumes one token.
std::optional<JsonError> Scanner::run(Root root, std::vector<JsonMember>* members,
                                      std::vector<JsonValue>* elements) {
  members_ = members;
  elements_ = elements;
  if (!startRoot(root)) return error_;
  State state = State::kValue;
  while (state != State::kEnd) {
    bool ok = false;
    switch (state) {
      case State::kValue:
        ok = stepValue(state);
        break;
      case State::kKey:
        ok = stepKey(state);
        break;
      case State::kAfterValue:
        ok = stepAfterValue(state);
        break;
      case State::kEnd:
        ok = true;
        break;
    }
    if (!ok) return error_;
  }
  return std::nullopt;
}

// No byte order mark, and the root the caller requires.
bool Scanner::startRoot(Root root) {
  skipWhitespace();
  if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) {
    return fail(p_, "a byte order mark is not allowed before JSON text");
  }
  if (root == Root::kObject && (p_ == end_ || *p_ != '{')) {
    return failExpected("'{' (a JSON object)");
  }
  if (root == Root::kArray && (p_ == end_ || *p_ != '[')) {
    return failExpected("'[' (a JSON array)");
  }
  return true;
}

// A value: a scalar whole, or the opening of a container (an empty one whole).
bool Scanner::stepValue(State& state) {
  skipWhitespace();
  if (p_ == end_) return failExpected("a JSON value");
  const bool isChild = depth_ == 1;  // checked before a container descends
  if (isChild) {
    child_.span.offset = offset(p_);
    childStringBytes_ = stringBytes_;
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
  if (ok && isChild) child_.type = type;
  return ok;
}

// An object key and its ':'.
bool Scanner::stepKey(State& state) {
  skipWhitespace();
  if (p_ == end_ || *p_ != '"') return failExpected("'\"' to begin an object key");
  const char* keyStart = p_;
  bool escaped = false;
  if (!scanString(escaped)) return false;
  if (depth_ == 1) {
    member_.keyOffset = offset(keyStart);
    member_.rawKey = std::string_view(keyStart + 1, static_cast<std::size_t>(p_ - keyStart) - 2);
    member_.keyEscaped = escaped;
  }
  skipWhitespace();
  if (p_ == end_ || *p_ != ':') return failExpected("':' after an object key");
  ++p_;
  state = State::kValue;
  return true;
}

// After a value: the end of input at depth 0, else ',' or the container's close.
bool Scanner::stepAfterValue(State& state) {
  if (depth_ == 1) recordRootChild();
  skipWhitespace();
  if (depth_ == 0) {
    if (p_ != end_) return failExpected("end of input after the JSON value");
    state = State::kEnd;
    return true;
  }
  const bool isObject = topIsObject();
  if (p_ != end_ && *p_ == ',') {
    ++p_;
    state = isObject ? State::kKey : State::kValue;
  } else if (p_ != end_ && *p_ == (isObject ? '}' : ']')) {
    ++p_;
    --depth_;
  } else {
    return failExpected(isObject ? "',' or '}' after an object member"
                                 : "',' or ']' after an array element");
  }
  return true;
}

// A child of the root container just ended: hand it to the caller's vector.
void Scanner::recordRootChild() {
  child_.span.length = offset(p_) - child_.span.offset;
  child_.stringBytes = stringBytes_ - childStringBytes_;
  if (topIsObject() && members_) {
    member_.value = child_;
    members_->push_back(member_);
  } else if (!topIsObject() && elements_) {
    elements_->push_back(child_);
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
