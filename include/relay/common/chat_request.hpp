// The few fields of a chat completion request the gateway routes and admits
// on, read with one validating scan of the body, and the rewrite that produces
// the forwarded body by splicing (json_splice.hpp): only the model value and
// stream_options ever change, every other byte goes upstream as the client
// sent it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "relay/common/json_scan.hpp"

namespace relay {

struct ChatRequestFields {
  std::string model;    // decoded; non-empty
  JsonSpan modelValue;  // the model's string value, quotes included

  JsonSpan messages;                 // the non-empty `messages` array
  std::size_t messageTextBytes = 0;  // bytes of every string inside `messages`

  bool stream = false;                    // absent or null: false
  std::optional<bool> includeUsage;       // stream_options.include_usage, unless absent or null
  std::optional<std::int64_t> maxTokens;  // absent or null: nullopt
  std::optional<std::int64_t> maxCompletionTokens;  // absent or null: nullopt

  // Where the rewrite splices stream_options (offsets in the body).
  JsonSpan body;                                 // the top-level object
  std::size_t lastMemberEnd = 0;                 // end of the last top-level value
  JsonType streamOptionsType = JsonType::kNull;  // kNull also when absent
  JsonSpan streamOptions;                        // its value, when present
  std::size_t streamOptionsLastMemberEnd = 0;    // 0: the object has no members
  JsonSpan includeUsageValue;                    // length 0 when include_usage is absent
};

// A request the gateway refuses with 400 invalid_request_error. `param` names
// the offending parameter (empty: null); `message` says what to fix.
struct ChatRequestError {
  std::string message;
  std::string param;
};

// Validates `body` (RFC 8259, strictly; see json_scan.hpp) and reads the
// fields above. Refuses: malformed JSON (the message carries the byte offset
// and what was expected), a non-object body, a missing or non-string or empty
// `model`, a missing, non-array or empty `messages`, wrongly typed `stream`,
// `stream_options`, `include_usage`, `max_tokens`, `max_completion_tokens`
// (null is accepted as absent), negative token limits, and a repeated key
// among those fields — parsers disagree on which duplicate wins, so the model
// the gateway routes on could differ from the one the upstream serves.
// Allocation: the decoded model, plus scratch vectors reused per thread.
std::optional<ChatRequestError> readChatRequest(std::string_view body, ChatRequestFields& out);

// POST /v1/embeddings: the same validation for `model`, and `input` (a
// non-empty string, or a non-empty array of strings, of token ids, or of
// arrays of token ids). Fills `out` as a non-streamed request whose
// messageTextBytes are the bytes of the input's strings; `tokenIds` counts the
// token ids given directly. The rewrite below then swaps only the model.
std::optional<ChatRequestError> readEmbeddingsRequest(std::string_view body,
                                                      ChatRequestFields& out,
                                                      std::size_t& tokenIds);

struct ChatRewrite {
  std::string_view model;          // upstream model id (decoded); empty: keep the client's
  bool forceIncludeUsage = false;  // make a streamed request report usage
};

// Appends the forwarded body to `out`: `body` with the model value replaced
// and, when `forceIncludeUsage` is set and the request streams, include_usage
// turned on — `stream_options` added when absent or null, `include_usage` added
// to it or set to true. Non-streamed requests keep stream_options untouched,
// since OpenAI refuses stream_options without `stream: true`. `fields` must come
// from readChatRequest(body).
void rewriteChatRequest(std::string_view body, const ChatRequestFields& fields,
                        const ChatRewrite& rewrite, std::string& out);

}  // namespace relay
