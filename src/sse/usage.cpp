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

bool readUsage(std::string_view text, JsonSpan object, Usage& usage) {
  if (scanObject(text, object, usageMembers)) return false;
  const auto& m = usageMembers;
  usage.promptTokens = tokens(intMember(text, m, "prompt_tokens"));
  usage.completionTokens = tokens(intMember(text, m, "completion_tokens"));
  // Both at most 2^48: the sum cannot overflow (it did, unclamped, for a
  // prompt_tokens of INT64_MAX; found by fuzz_sse).
  const std::optional<std::int64_t> total = intMember(text, m, "total_tokens");
  usage.totalTokens = tokens(total ? total : usage.promptTokens + usage.completionTokens);
  std::optional<std::int64_t> cached;
  if (nestedObject(text, m, "prompt_tokens_details", detailMembers)) {
    cached = intMember(text, detailMembers, "cached_tokens");
  }
  usage.cachedTokens = tokens(cached ? cached : intMember(text, m, "cached_tokens"));
  if (nestedObject(text, m, "completion_tokens_details", detailMembers)) {
    usage.reasoningTokens = tokens(intMember(text, detailMembers, "reasoning_tokens"));
  }
  return true;
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
    if (payload.substr(g - kG, kKey.size()) != kKey) continue;
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

// The last occurrence of `key` (which starts with '"') that begins before
// `before`: memrchr finds the quotes, so the search costs a vector scan and
// one comparison per quote rather than one comparison per byte.
std::size_t rfindQuoted(std::string_view text, std::string_view key, std::size_t before) {
  const char* const begin = text.data();
  std::size_t end = std::min(before, text.size());
  while (end > 0) {
    const void* hit = ::memrchr(begin, key.front(), end);
    if (!hit) break;
    const auto at = static_cast<std::size_t>(static_cast<const char*>(hit) - begin);
    if (text.substr(at, key.size()) == key) return at;
    end = at;
  }
  return std::string_view::npos;
}

}  // namespace

std::optional<Usage> extractBodyUsage(std::string_view body) {
  constexpr std::string_view kKey = "\"usage\"";
  for (std::size_t at = rfindQuoted(body, kKey, body.size());
       at != std::string_view::npos && at > 0; at = rfindQuoted(body, kKey, at)) {
    std::size_t slashes = 0;
    while (slashes < at && body[at - 1 - slashes] == '\\')
      ++slashes;
    if (slashes % 2 == 1) continue;  // an escaped quote: inside a string
    std::size_t p = body.find_first_not_of(" \t\r\n", at + kKey.size());
    if (p == std::string_view::npos || body[p] != ':') continue;  // a value, not a key
    p = body.find_first_not_of(" \t\r\n", p + 1);
    if (p == std::string_view::npos || body[p] != '{') break;  // "usage": null
    std::size_t end = objectEnd(body, p);
    if (end == std::string_view::npos) break;
    Usage usage;
    if (readUsage(body, JsonSpan{p, end - p}, usage)) return usage;
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
