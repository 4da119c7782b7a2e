// Reading scalar values and keys out of text that json_scan has validated.
#include <cstdint>
#include <cstring>
#include <limits>

#include "relay/common/json_scan.hpp"
#include "relay/common/utf8.hpp"

namespace relay {

namespace {

unsigned hex4(const char* p) {
  unsigned value = 0;
  for (int i = 0; i < 4; ++i) {
    const char c = p[i];
    const unsigned digit = (c >= '0' && c <= '9')   ? static_cast<unsigned>(c - '0')
                           : (c >= 'a' && c <= 'f') ? static_cast<unsigned>(c - 'a' + 10)
                                                    : static_cast<unsigned>(c - 'A' + 10);
    value = value * 16 + digit;
  }
  return value;
}

// Decodes the bytes between a validated string's quotes. Validation guarantees
// every backslash starts a complete escape and every high surrogate escape is
// followed by a low one, so no bounds or pairing checks are repeated here.
void unescapeContent(std::string_view content, std::string& out) {
  const char* p = content.data();
  const char* end = p + content.size();
  while (p != end) {
    const void* found = std::memchr(p, '\\', static_cast<std::size_t>(end - p));
    const char* backslash = found ? static_cast<const char*>(found) : end;
    out.append(p, backslash);
    if (backslash == end) return;
    p = backslash + 1;
    const char kind = *p++;
    switch (kind) {
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'u': {
        std::uint32_t unit = hex4(p);
        p += 4;
        if (unit >= 0xD800 && unit <= 0xDBFF) {
          const std::uint32_t low = hex4(p + 2);  // skips the "\u" of the pair's low half
          p += 6;
          unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
        }
        utf8::append(out, unit);
        break;
      }
      default:  // '"', '\\' and '/' stand for themselves
        out.push_back(kind);
        break;
    }
  }
}

}  // namespace

std::string_view jsonTypeName(JsonType type) {
  switch (type) {
    case JsonType::kNull:
      return "null";
    case JsonType::kBool:
      return "boolean";
    case JsonType::kNumber:
      return "number";
    case JsonType::kString:
      return "string";
    case JsonType::kArray:
      return "array";
    case JsonType::kObject:
      return "object";
  }
  return "value";
}

std::string JsonError::describe() const {
  return "at byte " + std::to_string(offset) + ": " + message;
}

bool keyEquals(const JsonMember& member, std::string_view key) {
  if (!member.keyEscaped) return member.rawKey == key;
  // Escaped keys are rare (no real client writes them) but must not let
  // "mod\u0065l" slip past a check on "model"; decoding costs one allocation.
  std::string decoded;
  unescapeContent(member.rawKey, decoded);
  return decoded == key;
}

const JsonMember* findMember(const std::vector<JsonMember>& members, std::string_view key) {
  for (const JsonMember& member : members) {
    if (keyEquals(member, key)) return &member;
  }
  return nullptr;
}

std::size_t countMembers(const std::vector<JsonMember>& members, std::string_view key) {
  std::size_t count = 0;
  for (const JsonMember& member : members)
    count += keyEquals(member, key) ? 1 : 0;
  return count;
}

std::string_view stringContent(std::string_view quoted) {
  if (quoted.size() < 2) return {};
  return quoted.substr(1, quoted.size() - 2);
}

void unescapeString(std::string_view quoted, std::string& out) {
  unescapeContent(stringContent(quoted), out);
}

std::optional<std::int64_t> parseInt(std::string_view token) {
  // Digits after an optional '-': a fraction, an exponent or anything else
  // is no integer; nor is a value outside int64.
  const char* p = token.data();
  const char* const end = p + token.size();
  const bool negative = p != end && *p == '-';
  if (negative) ++p;
  if (p == end) return std::nullopt;
  std::uint64_t value = 0;
  for (; p != end; ++p) {
    const unsigned digit = static_cast<unsigned char>(*p) - unsigned{'0'};
    if (digit > 9) return std::nullopt;
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (negative) {
    if (value > kMax + 1) return std::nullopt;
    return value == kMax + 1 ? std::numeric_limits<std::int64_t>::min()
                             : -static_cast<std::int64_t>(value);
  }
  if (value > kMax) return std::nullopt;
  return static_cast<std::int64_t>(value);
}

std::optional<bool> parseBool(std::string_view token) {
  if (token == "true") return true;
  if (token == "false") return false;
  return std::nullopt;
}

}  // namespace relay
