#include "relay/sse/usage.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string.h>  // memrchr (GNU)
#include <vector>

#include "relay/common/json_scan.hpp"
#include "relay/common/json_write.hpp"

namespace relay::sse {

namespace {

// Scratch vectors reused per thread: usage is read once per stream, but a
// worker reads many streams. Each function below uses its own vectors, so a
// caller's vector is never cleared underneath it.
thread_local std::vector<JsonMember> topMembers;
thread_local std::vector<JsonMember> choiceMembers;
thread_local std::vector<JsonMember> usageMembers;
thread_local std::vector<JsonMember> detailMembers;
thread_local std::vector<JsonValue> choiceElements;

std::optional<std::int64_t> intMember(std::string_view text, const std::vector<JsonMember>& members,
                                      std::string_view key) {
  const JsonMember* member = findMember(members, key);
  if (member == nullptr || member->value.type != JsonType::kNumber) return std::nullopt;
  return parseInt(member->value.span.in(text));
}

// The members of the object-valued member `key` of `members`, into `out`.
bool nestedObject(std::string_view text, const std::vector<JsonMember>& members,
                  std::string_view key, std::vector<JsonMember>& out) {
  const JsonMember* member = findMember(members, key);
  return member != nullptr && member->value.type == JsonType::kObject &&
         !scanObject(text, member->value.span, out);
}

// A count clamped to [0, kMaxUsageTokens] (usage.hpp); absent reads as 0.
std::int64_t tokens(std::optional<std::int64_t> count) {
  return std::clamp<std::int64_t>(count.value_or(0), 0, kMaxUsageTokens);
}

// What a usage object says, as read: each count from the first member of its
// name (absent, or not a number: nullopt), and whether the first
// `*_tokens_details` member was an object.
struct Counts {
  std::optional<std::int64_t> prompt, completion, total, cached;
  bool promptDetails = false, completionDetails = false;
  std::optional<std::int64_t> detailCached, reasoning;
};

Usage settle(const Counts& k) {
  Usage usage;
  usage.promptTokens = tokens(k.prompt);
  usage.completionTokens = tokens(k.completion);
  // Both at most 2^48: the sum cannot overflow (it did, unclamped, for a
  // prompt_tokens of INT64_MAX; found by fuzz_sse).
  usage.totalTokens = tokens(k.total ? k.total : usage.promptTokens + usage.completionTokens);
  const std::optional<std::int64_t> cached = k.promptDetails ? k.detailCached : std::nullopt;
  usage.cachedTokens = tokens(cached ? cached : k.cached);
  if (k.completionDetails) usage.reasoningTokens = tokens(k.reasoning);
  return usage;
}

// The one-pass reader behind readUsageQuick(): a cursor over the text and
// the few grammar pieces a usage object of the common shape is made of.
struct Cursor {
  const char* p;
  const char* end;

  void skipSpace() { p = skipJsonWhitespace(p, end); }
  bool eat(char c) {
    if (p != end && *p == c) {  // the common case: no whitespace before it
      ++p;
      return true;
    }
    skipSpace();
    if (p == end || *p != c) return false;
    ++p;
    return true;
  }
  // `"key"` and its ':', for a key of printable ASCII without escapes.
  bool key(std::string_view& out) {
    if (!eat('"')) return false;
    const void* quote = std::memchr(p, '"', static_cast<std::size_t>(end - p));
    if (quote == nullptr) return false;
    const char* close = static_cast<const char*>(quote);
    const char* s = p;
    // Eight bytes at a time: a backslash, a control or a non-ASCII byte sets
    // the high bit of its byte (a borrow starts only at such a byte, so a
    // word without one flags nothing).
    constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
    constexpr std::uint64_t kHighs = 0x8080808080808080ULL;
    auto clean = [](const char* at) {
      std::uint64_t x;
      std::memcpy(&x, at, 8);
      const std::uint64_t slash = x ^ (kOnes * '\\');
      return ((((slash - kOnes) & ~slash) | ((x - kOnes * 0x20) & ~x) | x) & kHighs) == 0;
    };
    if (close - s >= 8) {
      for (; close - s >= 8; s += 8)
        if (!clean(s)) return false;
      // The tail as the key's last eight bytes (some checked twice).
      if (s != close && !clean(close - 8)) return false;
    } else {
      for (; s != close; ++s) {
        const auto byte = static_cast<unsigned char>(*s);
        if (byte == '\\' || byte < 0x20 || byte >= 0x80) return false;
      }
    }
    out = std::string_view(p, static_cast<std::size_t>(close - p));
    p = close + 1;
    return eat(':');
  }
  // At a key spelled exactly as one of the usage counts' names (which have
  // no escapes or quotes): its slot in readUsageQuick(), past the key's
  // closing quote. Else -1, not moved (key() then reads whatever key it
  // is). One search for the closing quote, then a switch on the length: a
  // key is compared only with the names of its length.
  int usageKey() {
    skipSpace();
    if (p == end || *p != '"') return -1;
    const void* quote = std::memchr(p + 1, '"', static_cast<std::size_t>(end - p) - 1);
    if (quote == nullptr) return -1;
    const char* close = static_cast<const char*>(quote);
    const std::string_view k(p + 1, static_cast<std::size_t>(close - p) - 1);
    int slot = -1;
    switch (k.size()) {
      case 12:
        if (k == "total_tokens") slot = 2;
        break;
      case 13:
        if (k == "prompt_tokens")
          slot = 0;
        else if (k == "cached_tokens")
          slot = 3;
        break;
      case 17:
        if (k == "completion_tokens") slot = 1;
        break;
      case 21:
        if (k == "prompt_tokens_details") slot = 4;
        break;
      case 25:
        if (k == "completion_tokens_details") slot = 5;
        break;
      default:
        break;
    }
    if (slot >= 0) p = close + 1;
    return slot;
  }
  // A number (RFC 8259 grammar), a literal, or neither (false). A number's
  // integer value goes to `*count` when `count` is given; a literal leaves
  // it unset, as the general reader does for a count that is not a number.
  bool scalar(std::optional<std::int64_t>* count) {
    skipSpace();
    if (p == end) return false;
    const char* start = p;
    if (*p == '-' || isDigit(*p)) {
      const bool negative = *p == '-';
      if (negative) ++p;
      if (p == end || !isDigit(*p)) return false;
      const char* const digits = p;
      std::uint64_t value = 0;  // (wraps past 19 digits; used only up to 18)
      if (*p == '0') {
        if (++p != end && isDigit(*p)) return false;
      } else {
        for (; p != end && isDigit(*p); ++p)
          value = value * 10 + static_cast<unsigned>(*p - '0');
      }
      bool whole = !negative && p - digits <= 18;
      if (p != end && *p == '.') {
        whole = false;
        if (++p == end || !isDigit(*p)) return false;
        skipDigits();
      }
      if (p != end && (*p == 'e' || *p == 'E')) {
        whole = false;
        if (++p != end && (*p == '+' || *p == '-')) ++p;
        if (p == end || !isDigit(*p)) return false;
        skipDigits();
      }
      if (count) {
        // A count as counts come (a few digits, no sign) read on the way;
        // anything else as parseInt() reads it.
        *count = whole ? static_cast<std::int64_t>(value)
                       : parseInt(std::string_view(start, static_cast<std::size_t>(p - start)));
      }
      return true;
    }
    for (std::string_view word : {"null", "true", "false"}) {
      if (static_cast<std::size_t>(end - p) >= word.size() &&
          std::memcmp(p, word.data(), word.size()) == 0) {
        p += word.size();
        return true;
      }
    }
    return false;  // a string, an array: not the common shape
  }
  // A flat object of scalars; the first member named `want` into `*count`.
  bool flatObject(std::string_view want, std::optional<std::int64_t>* count) {
    ++p;  // at '{'
    if (eat('}')) return true;
    for (;;) {
      std::string_view name;
      if (!key(name)) return false;
      const bool first = count != nullptr && name == want;
      if (!scalar(first ? count : nullptr)) return false;
      if (first) count = nullptr;
      if (eat(',')) continue;
      return eat('}');
    }
  }

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }
  void skipDigits() {
    while (p != end && isDigit(*p))
      ++p;
  }
};

// The general reader: any valid object (escaped keys, string or array
// values, any nesting), validated by json_scan.
bool readUsageScanned(std::string_view text, JsonSpan object, Usage& usage) {
  if (scanObject(text, object, usageMembers)) return false;
  const auto& m = usageMembers;
  Counts k;
  k.prompt = intMember(text, m, "prompt_tokens");
  k.completion = intMember(text, m, "completion_tokens");
  k.total = intMember(text, m, "total_tokens");
  k.cached = intMember(text, m, "cached_tokens");
  if (nestedObject(text, m, "prompt_tokens_details", detailMembers)) {
    k.promptDetails = true;
    k.detailCached = intMember(text, detailMembers, "cached_tokens");
  }
  if (nestedObject(text, m, "completion_tokens_details", detailMembers)) {
    k.completionDetails = true;
    k.reasoning = intMember(text, detailMembers, "reasoning_tokens");
  }
  usage = settle(k);
  return true;
}

bool readUsage(std::string_view text, JsonSpan object, Usage& usage) {
  Usage quick;
  if (readUsageQuick(text, object.offset, quick) == object.end()) {
    usage = quick;
    return true;
  }
  return readUsageScanned(text, object, usage);
}

// Members of choices[0] into choiceMembers; false when there is no such object.
bool scanFirstChoice(std::string_view text, const std::vector<JsonMember>& top) {
  const JsonMember* choices = findMember(top, "choices");
  if (choices == nullptr || choices->value.type != JsonType::kArray) return false;
  if (scanArray(text, choices->value.span, choiceElements)) return false;
  if (choiceElements.empty() || choiceElements[0].type != JsonType::kObject) return false;
  return !scanObject(text, choiceElements[0].span, choiceMembers);
}

void appendInt(std::string& out, std::int64_t value) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, result.ptr);
}

}  // namespace

std::size_t readUsageQuick(std::string_view text, std::size_t open, Usage& usage) {
  constexpr std::size_t kNo = std::string_view::npos;
  if (open >= text.size() || text[open] != '{') return kNo;
  Cursor c{text.data() + open, text.data() + text.size()};
  ++c.p;
  Counts k;
  bool seen[6] = {};
  if (!c.eat('}')) {
    for (;;) {
      // prompt_tokens, completion_tokens, total_tokens, cached_tokens,
      // prompt_tokens_details, completion_tokens_details
      int slot = c.usageKey();
      if (slot < 0) {
        std::string_view name;
        if (!c.key(name)) return kNo;
      } else if (!c.eat(':')) {
        return kNo;
      }
      const bool first = slot >= 0 && !seen[slot];
      if (first) seen[slot] = true;
      c.skipSpace();
      if (c.p != c.end && *c.p == '{') {
        std::optional<std::int64_t>* into = nullptr;
        std::string_view want;
        if (first && slot == 4) {
          k.promptDetails = true;
          into = &k.detailCached;
          want = "cached_tokens";
        } else if (first && slot == 5) {
          k.completionDetails = true;
          into = &k.reasoning;
          want = "reasoning_tokens";
        }
        if (!c.flatObject(want, into)) return kNo;
      } else {
        std::optional<std::int64_t>* counts[4] = {&k.prompt, &k.completion, &k.total, &k.cached};
        if (!c.scalar(first && slot < 4 ? counts[slot] : nullptr)) return kNo;
      }
      if (c.eat(',')) continue;
      if (!c.eat('}')) return kNo;
      break;
    }
  }
  usage = settle(k);
  return static_cast<std::size_t>(c.p - text.data());
}

bool readUsageObject(std::string_view text, std::size_t offset, std::size_t length, Usage& usage) {
  return readUsageScanned(text, JsonSpan{offset, length}, usage);
}

bool mayContainUsage(std::string_view payload) {
  constexpr std::string_view kKey = "\"usage\"";
  constexpr std::size_t kG = 4;  // kKey[kG] == 'g', the rarest of its bytes in chat chunks
  constexpr std::string_view kSpace = " \t\r\n";
  // memchr for the 'g' (vectorised, and rare in chunk framing), then a look
  // around it: this runs on every event of every stream, and both memmem and
  // string_view::find cost several times more per byte.
  const char* base = payload.data();
  for (std::size_t at = kG; at + (kKey.size() - kG) <= payload.size();) {
    const void* hit = std::memchr(base + at, 'g', payload.size() - at - (kKey.size() - kG - 1));
    if (hit == nullptr) return false;
    const std::size_t g = static_cast<std::size_t>(static_cast<const char*>(hit) - base);
    at = g + 1;
    // Its neighbours first: a 'g' of another word ("logprobs",
    // "fingerprint") is turned away by two byte compares.
    if (base[g - 1] != 'a' || base[g + 1] != 'e' ||
        std::memcmp(base + g - kG, kKey.data(), kKey.size()) != 0)
      continue;
    std::size_t p = payload.find_first_not_of(kSpace, g - kG + kKey.size());
    if (p == std::string_view::npos || payload[p] != ':') continue;
    p = payload.find_first_not_of(kSpace, p + 1);
    if (p != std::string_view::npos && payload[p] == '{') return true;
  }
  return false;
}

std::optional<FoundUsage> extractUsage(std::string_view payload) {
  if (!mayContainUsage(payload)) return std::nullopt;
  if (scanObject(payload, topMembers)) return std::nullopt;
  FoundUsage found;
  const JsonMember* usage = findMember(topMembers, "usage");
  if (usage != nullptr && usage->value.type == JsonType::kObject) {
    if (!readUsage(payload, usage->value.span, found.usage)) return std::nullopt;
    const JsonMember* choices = findMember(topMembers, "choices");
    if (choices != nullptr && choices->value.type == JsonType::kArray) {
      const std::string_view array = choices->value.span.in(payload);
      found.usageOnlyChunk = array.find_first_not_of(" \t\r\n", 1) == array.size() - 1;
    }
    return found;
  }
  if (!scanFirstChoice(payload, topMembers)) return std::nullopt;
  usage = findMember(choiceMembers, "usage");
  if (usage == nullptr || usage->value.type != JsonType::kObject) return std::nullopt;
  if (!readUsage(payload, usage->value.span, found.usage)) return std::nullopt;
  found.place = UsagePlace::kFirstChoice;
  return found;
}

namespace {

// The end (one past '}') of the object starting at text[open], skipping
// strings; npos when it does not close.
std::size_t objectEnd(std::string_view text, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

// The last occurrence of `key` that begins before `before`. memrchr looks
// for the key's byte at `pivot`, one that is rare where usage sits (the 'g'
// of "usage": after it, an OpenAI body has it only in "reasoning_tokens" and
// "system_fingerprint"), so the search is a vector scan and a comparison or
// two — searching for the quote would stop at every key and string.
std::size_t rfindKey(std::string_view text, std::string_view key, std::size_t pivot,
                     std::size_t before) {
  if (before == 0 || text.size() < key.size()) return std::string_view::npos;
  const char* const begin = text.data();
  // A match starting at s has its pivot byte at s + pivot; s < before, and
  // the whole key fits in the text.
  std::size_t end = std::min(before - 1, text.size() - key.size()) + pivot + 1;
  while (end > pivot) {
    const void* hit = ::memrchr(begin + pivot, key[pivot], end - pivot);
    if (!hit) break;
    const auto at = static_cast<std::size_t>(static_cast<const char*>(hit) - begin) - pivot;
    if (std::memcmp(begin + at, key.data(), key.size()) == 0) return at;
    end = at + pivot;
  }
  return std::string_view::npos;
}

}  // namespace

std::optional<Usage> extractBodyUsage(std::string_view body) {
  constexpr std::string_view kKey = "\"usage\"";
  constexpr std::size_t kPivot = 4;  // the 'g'
  static_assert(kKey[kPivot] == 'g');
  for (std::size_t at = rfindKey(body, kKey, kPivot, body.size());
       at != std::string_view::npos && at > 0; at = rfindKey(body, kKey, kPivot, at)) {
    std::size_t slashes = 0;
    while (slashes < at && body[at - 1 - slashes] == '\\')
      ++slashes;
    if (slashes % 2 == 1) continue;  // an escaped quote: inside a string
    std::size_t p = body.find_first_not_of(" \t\r\n", at + kKey.size());
    if (p == std::string_view::npos || body[p] != ':') continue;  // a value, not a key
    p = body.find_first_not_of(" \t\r\n", p + 1);
    if (p == std::string_view::npos || body[p] != '{') break;  // "usage": null
    Usage usage;
    if (readUsageQuick(body, p, usage) != std::string_view::npos) return usage;
    std::size_t end = objectEnd(body, p);
    if (end == std::string_view::npos) break;
    if (readUsageScanned(body, JsonSpan{p, end - p}, usage)) return usage;
    break;
  }
  std::optional<FoundUsage> found = extractUsage(body);
  if (!found) return std::nullopt;
  return found->usage;
}

bool readChunkIdentity(std::string_view payload, ChunkIdentity& out) {
  if (scanObject(payload, topMembers)) return false;
  const JsonMember* id = findMember(topMembers, "id");
  const JsonMember* model = findMember(topMembers, "model");
  const std::optional<std::int64_t> created = intMember(payload, topMembers, "created");
  if (id == nullptr || id->value.type != JsonType::kString || model == nullptr ||
      model->value.type != JsonType::kString || !created) {
    return false;
  }
  out.id.clear();
  out.model.clear();
  unescapeString(id->value.span.in(payload), out.id);
  unescapeString(model->value.span.in(payload), out.model);
  out.created = *created;
  return true;
}

void appendUsageJson(std::string& out, const Usage& usage) {
  out.append(R"({"prompt_tokens":)");
  appendInt(out, usage.promptTokens);
  out.append(R"(,"completion_tokens":)");
  appendInt(out, usage.completionTokens);
  out.append(R"(,"total_tokens":)");
  appendInt(out, usage.totalTokens);
  out.append(R"(,"prompt_tokens_details":{"cached_tokens":)");
  appendInt(out, usage.cachedTokens);
  out.append(R"(},"completion_tokens_details":{"reasoning_tokens":)");
  appendInt(out, usage.reasoningTokens);
  out.append("}}");
}

void appendUsageChunk(std::string& out, const ChunkIdentity& identity, const Usage& usage) {
  out.append(R"({"id":)");
  appendJsonString(out, identity.id);
  out.append(R"(,"object":"chat.completion.chunk","created":)");
  appendInt(out, identity.created);
  out.append(R"(,"model":)");
  appendJsonString(out, identity.model);
  out.append(R"(,"choices":[],"usage":)");
  appendUsageJson(out, usage);
  out.push_back('}');
}

namespace {

// Adds to `spans` the byte ranges that erase every member of one object that
// is named "usage" (escapes decoded, as a JSON reader would), so that what is
// left is still valid JSON: a member with a kept member after it goes with
// its comma and the whitespace up to the next key; one with only erased
// members after it goes with the comma before it, from the end of the
// previous value. The ranges never overlap (nor do they with those of a
// nested object, which lie inside a kept member).
void usageSpans(const std::vector<JsonMember>& members, std::vector<JsonSpan>& spans) {
  std::size_t lastKept = members.size();
  for (std::size_t i = 0; i < members.size(); ++i)
    if (!keyEquals(members[i], "usage")) lastKept = i;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (!keyEquals(members[i], "usage")) continue;
    if (lastKept == members.size()) {  // every member goes: keep the braces
      spans.push_back(
          {members.front().keyOffset, members.back().value.span.end() - members.front().keyOffset});
      return;
    }
    if (i < lastKept) {
      spans.push_back({members[i].keyOffset, members[i + 1].keyOffset - members[i].keyOffset});
    } else {
      const std::size_t from = members[i - 1].value.span.end();
      spans.push_back({from, members[i].value.span.end() - from});
    }
  }
}

}  // namespace

bool removeUsage(std::string_view payload, bool topLevel, std::string& out) {
  if (payload.find("\"usage\"") == std::string_view::npos) return false;  // the common case
  if (scanObject(payload, topMembers)) return false;
  std::vector<JsonSpan> spans;
  if (topLevel) usageSpans(topMembers, spans);
  if (scanFirstChoice(payload, topMembers)) usageSpans(choiceMembers, spans);
  if (spans.empty()) return false;
  std::sort(spans.begin(), spans.end(),
            [](const JsonSpan& a, const JsonSpan& b) { return a.offset < b.offset; });
  out.reserve(out.size() + payload.size());
  std::size_t copied = 0;
  for (const JsonSpan& span : spans) {
    out.append(payload.substr(copied, span.offset - copied));
    copied = span.end();
  }
  out.append(payload.substr(copied));
  return true;
}

bool removeChoiceUsage(std::string_view payload, std::string& out) {
  return removeUsage(payload, false, out);
}

}  // namespace relay::sse
