// Token usage in chat completion responses, read with json_scan (no DOM).
//
// Where it sits: OpenAI streams put it in a final chunk with `"choices": []`
// and a top-level `usage` object (only with stream_options.include_usage, every
// other chunk then says `"usage": null`); Moonshot streams put it in
// `choices[0].usage` of the last chunk; a non-streamed chat.completion has it
// at the top level. Cached prompt tokens are `prompt_tokens_details.
// cached_tokens`, or Moonshot's `usage.cached_tokens`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace relay::sse {

// Every count read from an upstream lies in [0, kMaxUsageTokens]: a negative
// one reads as 0 and a larger one as the maximum, so that the gateway can add
// a few counts and cast them to unsigned without overflow, whatever a broken
// upstream sends (far beyond any real response: 2^48 tokens).
inline constexpr std::int64_t kMaxUsageTokens = std::int64_t{1} << 48;

struct Usage {
  std::int64_t promptTokens = 0;  // includes the cached ones
  std::int64_t completionTokens = 0;
  std::int64_t totalTokens = 0;  // prompt + completion when the upstream omits it
  std::int64_t cachedTokens = 0;
  std::int64_t reasoningTokens = 0;  // completion_tokens_details.reasoning_tokens
  friend bool operator==(const Usage&, const Usage&) = default;
};

enum class UsagePlace : std::uint8_t { kTopLevel, kFirstChoice };

struct FoundUsage {
  Usage usage;
  UsagePlace place = UsagePlace::kTopLevel;
  bool usageOnlyChunk = false;  // top-level usage and `"choices": []` (OpenAI's extra chunk)
};

// False when `payload` certainly holds no usage object: no `"usage"` key is
// followed by '{'. Ordinary chunks (`"usage": null` or no usage at all) are
// rejected by a substring search without parsing.
bool mayContainUsage(std::string_view payload);

// Usage of a chat.completion.chunk payload or a chat.completion body: the
// top-level `usage` object, else `choices[0].usage`. nullopt when there is
// none, or when the payload is not a valid JSON object.
std::optional<FoundUsage> extractUsage(std::string_view payload);

// Usage of a whole (non-streamed) chat.completion body, for a relay that
// passes the body on and need not validate it: finds the last `"usage"` key
// (a quote that no odd run of backslashes escapes is a real delimiter, so the
// match cannot sit inside a string), then reads and validates only that
// object. Falls back to extractUsage() when the shortcut does not apply.
std::optional<Usage> extractBodyUsage(std::string_view body);

// Reads the usage object that opens at text[open] in one pass, for the shape
// every provider sends: keys of plain ASCII without escapes, values numbers or
// literals, and one level of objects of the same (the `*_tokens_details`).
// Returns one past the object's '}' and sets `usage`; npos, leaving `usage`
// alone, for any other shape or invalid JSON — the general reader then
// decides. Where it answers, it answers as readUsageObject() does (fuzz_sse
// compares the two).
std::size_t readUsageQuick(std::string_view text, std::size_t open, Usage& usage);

// The general reader: the object at [offset, offset + length) of `text`,
// validated by json_scan, any key spelling, value type or nesting; false when
// it is not a valid JSON object.
bool readUsageObject(std::string_view text, std::size_t offset, std::size_t length, Usage& usage);

// What every chunk of one stream shares; read from its first chunk.
struct ChunkIdentity {
  std::string id;
  std::int64_t created = 0;
  std::string model;
};

// Reads `id`, `created` and `model` from a chunk; false when any is missing
// or mistyped.
bool readChunkIdentity(std::string_view payload, ChunkIdentity& out);

// Appends `{"prompt_tokens":…,"completion_tokens":…,"total_tokens":…,
// "prompt_tokens_details":{"cached_tokens":…},
// "completion_tokens_details":{"reasoning_tokens":…}}`.
void appendUsageJson(std::string& out, const Usage& usage);

// Appends the OpenAI-style usage-only chunk (JSON, not SSE-framed):
// `{"id":…,"object":"chat.completion.chunk","created":…,"model":…,"choices":[],"usage":{…}}`.
void appendUsageChunk(std::string& out, const ChunkIdentity& identity, const Usage& usage);

// Appends `payload` without the `usage` members of choices[0] (Moonshot's
// place for it) and, with `topLevel`, without the top-level ones (OpenAI's),
// for a caller who must not see them. Every member so named goes, duplicates
// and escaped spellings of the key included; every other byte is kept.
// Returns false, appending nothing, when there is no such member or the
// payload is not a JSON object.
bool removeUsage(std::string_view payload, bool topLevel, std::string& out);

// removeUsage() of choices[0] only.
bool removeChoiceUsage(std::string_view payload, std::string& out);

}  // namespace relay::sse
