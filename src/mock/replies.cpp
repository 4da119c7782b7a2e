#include "replies.hpp"

namespace relay::mock {

namespace {

struct StatusDefaults {
  std::string_view type;
  std::string_view code;  // OpenAI only
};

// OpenAI's types and codes per status (PROTOCOLS.md, "Errors").
StatusDefaults openAiDefaults(int status) {
  switch (status) {
    case 401:
      return {"invalid_request_error", "invalid_api_key"};
    case 403:
      return {"permission_denied", ""};
    case 404:
      return {"invalid_request_error", "model_not_found"};
    case 429:
      return {"requests", "rate_limit_exceeded"};
    default:
      return {status >= 500 ? "server_error" : "invalid_request_error", ""};
  }
}

// Moonshot's types per status (PROTOCOLS.md, "Moonshot / Kimi differences").
std::string_view moonshotType(int status) {
  switch (status) {
    case 401:
      return "invalid_authentication_error";
    case 403:
      return "permission_denied_error";
    case 404:
      return "resource_not_found_error";
    case 429:
      return "rate_limit_reached_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

void appendUsage(std::string& out, Flavor flavor, const Usage& u) {
  out += "{\"prompt_tokens\":";
  out += std::to_string(u.promptTokens);
  out += ",\"completion_tokens\":";
  out += std::to_string(u.completionTokens);
  out += ",\"total_tokens\":";
  out += std::to_string(u.promptTokens + u.completionTokens);
  if (flavor == Flavor::kMoonshot) {
    out += ",\"cached_tokens\":";
    out += std::to_string(u.cachedTokens);
    out += '}';
  } else {
    out += ",\"prompt_tokens_details\":{\"cached_tokens\":";
    out += std::to_string(u.cachedTokens);
    out += "},\"completion_tokens_details\":{\"reasoning_tokens\":0}}";
  }
}

}  // namespace

std::string errorBody(Flavor flavor, int status, const ErrorFields& fields) {
  if (flavor == Flavor::kMoonshot) {
    std::string out;
    out += "{\"error\":{\"type\":";
    appendJsonString(out, fields.type.empty() ? moonshotType(status) : fields.type);
    out += ",\"message\":";
    appendJsonString(out, fields.message);
    out += "}}";
    return out;
  }
  StatusDefaults defaults = openAiDefaults(status);
  std::string_view type = fields.type.empty() ? defaults.type : fields.type;
  std::string_view code = fields.code                    ? *fields.code
                          : type == "insufficient_quota" ? "insufficient_quota"
                                                         : defaults.code;
  return openAiErrorJson(fields.message, type, code, fields.param);
}

std::string makeEcho(std::string_view text, std::size_t maxCodePoints) {
  if (text.empty()) return "mock reply";
  std::size_t seen = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    bool starts = (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    if (starts && seen++ == maxCodePoints) return std::string(text.substr(0, i));
  }
  return std::string(text);
}

std::string completionBody(Flavor flavor, const CompletionPlan& plan) {
  std::string out;
  out.reserve(512 + plan.echo.size() + plan.usage.completionTokens * 6);
  out += "{\"id\":\"";
  out += plan.id;
  out += "\",\"object\":\"chat.completion\",\"created\":";
  out += std::to_string(plan.created);
  out += ",\"model\":";
  appendJsonString(out, plan.model);
  out += ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":";
  std::string content;
  if (plan.usage.completionTokens > 0) content = plan.echo;
  for (std::uint64_t i = 1; i < plan.usage.completionTokens; ++i) {
    content += ' ';
    content += std::to_string(i);
  }
  appendJsonString(out, content);
  out += "},\"logprobs\":null,\"finish_reason\":\"";
  out += plan.finishReason;
  out += "\"}],\"usage\":";
  appendUsage(out, flavor, plan.usage);
  out += '}';
  return out;
}

ChunkBuilder::ChunkBuilder(Flavor flavor, const CompletionPlan& plan, bool includeUsage)
    : flavor_(flavor), plan_(plan), includeUsage_(includeUsage && flavor == Flavor::kOpenAi) {
  prefix_ = "data: {\"id\":\"";
  prefix_ += plan.id;
  prefix_ += "\",\"object\":\"chat.completion.chunk\",\"created\":";
  prefix_ += std::to_string(plan.created);
  prefix_ += ",\"model\":";
  appendJsonString(prefix_, plan.model);
  prefix_ += ",\"choices\":[";
  appendJsonString(escapedEcho_, plan.echo);
  buffer_.reserve(prefix_.size() + escapedEcho_.size() + 128);
}

void ChunkBuilder::closeChunk() {
  buffer_ += ']';
  // OpenAI with include_usage: "usage": null on every chunk but the usage chunk.
  if (includeUsage_) buffer_ += ",\"usage\":null";
  buffer_ += "}\n\n";
}

const std::string& ChunkBuilder::content(std::uint64_t index) {
  buffer_ = prefix_;
  buffer_ += "{\"index\":0,\"delta\":{";
  if (index == 0) {
    buffer_ += "\"role\":\"assistant\",\"content\":";
    buffer_ += escapedEcho_;
  } else {
    buffer_ += "\"content\":\" ";
    buffer_ += std::to_string(index);
    buffer_ += '"';
  }
  buffer_ += "},\"logprobs\":null,\"finish_reason\":null}";
  closeChunk();
  return buffer_;
}

const std::string& ChunkBuilder::tail() {
  buffer_ = prefix_;
  buffer_ += "{\"index\":0,\"delta\":";
  // With no content chunk the role has not been sent yet.
  buffer_ += plan_.usage.completionTokens == 0 ? "{\"role\":\"assistant\",\"content\":\"\"}" : "{}";
  buffer_ += ",\"logprobs\":null,\"finish_reason\":\"";
  buffer_ += plan_.finishReason;
  buffer_ += '"';
  if (flavor_ == Flavor::kMoonshot) {
    // Moonshot streams usage beside finish_reason, whatever stream_options says.
    buffer_ += ",\"usage\":";
    appendUsage(buffer_, flavor_, plan_.usage);
  }
  buffer_ += '}';
  closeChunk();
  if (includeUsage_) {
    buffer_ += prefix_;
    buffer_ += "],\"usage\":";
    appendUsage(buffer_, flavor_, plan_.usage);
    buffer_ += "}\n\n";
  }
  buffer_ += "data: [DONE]\n\n";
  return buffer_;
}

}  // namespace relay::mock
