// The few fields of a chat completion request the mock needs, read in one
// SAX pass: no DOM is built, so a request costs one scan of its body.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace relay::mock {

struct ChatRequest {
  std::string model;
  bool stream = false;
  bool includeUsage = false;               // stream_options.include_usage
  std::optional<std::uint64_t> maxTokens;  // min of max_tokens and max_completion_tokens
  std::uint64_t messageCount = 0;
  // Unicode code points across every message's `content` (a string, or the
  // `text` of each part of a content array). The prompt token formula uses it.
  std::uint64_t contentChars = 0;
  std::string lastUserContent;  // content of the last message with role "user"
  bool hasUserMessage = false;
};

struct ChatRequestResult {
  ChatRequest request;
  std::string error;  // OpenAI-style message for a 400; empty on success
  std::string param;  // the offending parameter, if one is to blame
  bool ok() const { return error.empty(); }
};

ChatRequestResult parseChatRequest(std::string_view body);

// Code points in UTF-8 text (bytes that do not continue a sequence).
std::uint64_t countCodePoints(std::string_view utf8);

}  // namespace relay::mock
