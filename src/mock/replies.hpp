// Response bodies of the mock upstream, built by string concatenation: the
// fixed parts are literals and only the ids, model and numbers vary, so no
// JSON document is built per request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "relay/common/json_write.hpp"

namespace relay::mock {

// Which upstream the mock imitates: OpenAI's shapes or Moonshot's (error bodies
// without param/code, streamed usage inside choices[0], top-level cached_tokens).
enum class Flavor { kOpenAi, kMoonshot };

struct Usage {
  std::uint64_t promptTokens = 0;
  std::uint64_t completionTokens = 0;
  std::uint64_t cachedTokens = 0;
};

// JSON string literals: the project's own writer.
using relay::appendJsonString;

struct ErrorFields {
  std::string_view message;
  std::string_view type;   // empty = the status's default type for the flavor
  std::string_view param;  // empty = null
  // OpenAI flavor only: nullopt = the status's default code; empty = null.
  std::optional<std::string_view> code;
};

// {"error":{...}} in the flavor's shape.
std::string errorBody(Flavor flavor, int status, const ErrorFields& fields);

// The assistant's text is a sequence of pieces, one per completion token: piece
// 0 echoes the last user message (truncated), piece i > 0 is " i". A stream
// sends one piece per chunk, so the concatenated deltas equal the non-stream
// message content of the same request.
struct CompletionPlan {
  std::string id;  // chatcmpl-mock-<n>, shared by every chunk
  std::int64_t created = 0;
  std::string model;
  std::string echo;  // piece 0, unescaped
  Usage usage;       // usage.completionTokens = number of pieces
  std::string_view finishReason = "stop";
};

// The whole chat.completion JSON.
std::string completionBody(Flavor flavor, const CompletionPlan& plan);

// SSE events of one stream. Each call returns a buffer valid until the next call.
class ChunkBuilder {
 public:
  // `includeUsage` (OpenAI flavor): "usage":null on every chunk and a usage
  // chunk before [DONE]. The Moonshot flavor always puts usage in the last chunk.
  ChunkBuilder(Flavor flavor, const CompletionPlan& plan, bool includeUsage);

  // `data: {chunk}\n\n` holding piece `index`.
  const std::string& content(std::uint64_t index);
  // The finish_reason chunk, the usage chunk when it is due, and `data: [DONE]`.
  const std::string& tail();

 private:
  void closeChunk();

  Flavor flavor_;
  const CompletionPlan& plan_;
  bool includeUsage_;
  std::string prefix_;       // `data: {"id":..,"model":..,"choices":[`
  std::string escapedEcho_;  // piece 0 as JSON string contents
  std::string buffer_;
};

// Piece 0: the first `maxCodePoints` code points of `text`, or "mock reply" when empty.
std::string makeEcho(std::string_view text, std::size_t maxCodePoints = 64);

}  // namespace relay::mock
