#include "relay/common/chat_request.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "relay/common/json_splice.hpp"
#include "relay/common/json_write.hpp"

namespace relay {

namespace {

ChatRequestError invalidType(std::string_view param, std::string_view expected,
                             const JsonMember& member) {
  return {"Invalid type for '" + std::string(param) + "': expected " + std::string(expected) +
              ", but got " + std::string(jsonTypeName(member.value.type)) + " instead.",
          std::string(param)};
}

// The members of one object a reader wants, found in one pass over them:
// each wanted key's member and whether it came twice. OpenAI treats an
// explicit null as "not given": take() gives nullptr for it (raw() keeps it).
template <std::size_t N>
class MemberIndex {
 public:
  MemberIndex(const std::vector<JsonMember>& members, const std::array<std::string_view, N>& keys)
      : keys_(keys) {
    for (const JsonMember& m : members) {
      for (std::size_t i = 0; i < N; ++i) {
        const bool same =
            m.keyEscaped ? keyEquals(m, keys[i])
                         : m.rawKey.size() == keys[i].size() &&
                               std::memcmp(m.rawKey.data(), keys[i].data(), keys[i].size()) == 0;
        if (!same) continue;
        if (found_[i] != nullptr) duplicate_[i] = true;
        found_[i] = &m;
        break;
      }
    }
  }

  // The member of keys[i] (nullptr when absent or null), or the error of a
  // duplicate key.
  std::optional<ChatRequestError> take(std::size_t i, const JsonMember*& found) const {
    found = nullptr;
    if (duplicate_[i]) {
      return ChatRequestError{"Duplicate key '" + std::string(keys_[i]) + "' in the request body.",
                              std::string(keys_[i])};
    }
    if (found_[i] != nullptr && found_[i]->value.type != JsonType::kNull) found = found_[i];
    return std::nullopt;
  }
  // The member of keys[i] as it is, null included.
  const JsonMember* raw(std::size_t i) const { return found_[i]; }

 private:
  const std::array<std::string_view, N>& keys_;
  std::array<const JsonMember*, N> found_{};
  std::array<bool, N> duplicate_{};
};

// The members a chat request and an embeddings request are read for.
enum ChatKey : std::size_t {
  kModel,
  kMessages,
  kStream,
  kStreamOptions,
  kMaxTokens,
  kMaxCompletionTokens,
};
constexpr std::array<std::string_view, 6> kChatKeys{
    "model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens"};
enum EmbeddingsKey : std::size_t { kEmbeddingsModel, kInput };
constexpr std::array<std::string_view, 2> kEmbeddingsKeys{"model", "input"};
constexpr std::array<std::string_view, 1> kStreamOptionKeys{"include_usage"};

std::optional<ChatRequestError> readTokenLimit(std::string_view body,
                                               const MemberIndex<kChatKeys.size()>& members,
                                               ChatKey which, std::optional<std::int64_t>& out) {
  const std::string_view key = kChatKeys[which];
  const JsonMember* member = nullptr;
  if (auto error = members.take(which, member)) return error;
  if (member == nullptr) return std::nullopt;
  out = member->value.type == JsonType::kNumber ? parseInt(member->value.span.in(body))
                                                : std::nullopt;
  if (!out) return invalidType(key, "an integer", *member);
  if (*out < 0) {
    return ChatRequestError{"Invalid '" + std::string(key) + "': expected a value >= 0.",
                            std::string(key)};
  }
  return std::nullopt;
}

std::optional<ChatRequestError> readStreamOptions(std::string_view body, const JsonMember& member,
                                                  ChatRequestFields& out) {
  if (member.value.type != JsonType::kObject)
    return invalidType("stream_options", "an object", member);
  out.streamOptionsType = JsonType::kObject;
  out.streamOptions = member.value.span;
  thread_local std::vector<JsonMember> members;
  // Already validated as part of the body; this scan only lists the members.
  if (auto error = scanObject(body, member.value.span, members)) {
    return ChatRequestError{"Invalid 'stream_options': " + error->describe(), "stream_options"};
  }
  if (!members.empty()) out.streamOptionsLastMemberEnd = members.back().value.span.end();
  const MemberIndex<kStreamOptionKeys.size()> options(members, kStreamOptionKeys);
  const JsonMember* includeUsage = nullptr;
  if (auto error = options.take(0, includeUsage)) {
    error->param = "stream_options.include_usage";
    return error;
  }
  if (includeUsage == nullptr) {
    // Absent or null: remember a null's span so the rewrite can overwrite it.
    if (const JsonMember* m = options.raw(0)) out.includeUsageValue = m->value.span;
    return std::nullopt;
  }
  out.includeUsageValue = includeUsage->value.span;
  out.includeUsage = parseBool(includeUsage->value.span.in(body));
  if (!out.includeUsage) {
    return invalidType("stream_options.include_usage", "a boolean", *includeUsage);
  }
  return std::nullopt;
}

// What every model request starts with: a JSON object (its span and the end
// of its last member in `out`, its members in `members`)...
std::optional<ChatRequestError> readObject(std::string_view body, std::vector<JsonMember>& members,
                                           ChatRequestFields& out) {
  if (auto error = scanObject(body, members)) {
    return ChatRequestError{
        "We could not parse the JSON body of your request: " + error->describe(), ""};
  }
  const std::size_t open = body.find('{');  // validation put the object there
  out.body = {open, body.find_last_of('}') + 1 - open};
  if (!members.empty()) out.lastMemberEnd = members.back().value.span.end();
  return std::nullopt;
}

// ...with a non-empty string `model`.
template <std::size_t N>
std::optional<ChatRequestError> readModel(std::string_view body, const MemberIndex<N>& members,
                                          std::size_t which, ChatRequestFields& out) {
  const JsonMember* model = nullptr;
  if (auto error = members.take(which, model)) return error;
  if (model == nullptr) return ChatRequestError{"you must provide a model parameter", "model"};
  if (model->value.type != JsonType::kString) return invalidType("model", "a string", *model);
  unescapeString(model->value.span.in(body), out.model);
  if (out.model.empty()) return ChatRequestError{"'model' must not be empty.", "model"};
  out.modelValue = model->value.span;
  return std::nullopt;
}

}  // namespace

std::optional<ChatRequestError> readChatRequest(std::string_view body, ChatRequestFields& out) {
  out = ChatRequestFields{};
  thread_local std::vector<JsonMember> all;
  if (auto error = readObject(body, all, out)) return error;
  const MemberIndex<kChatKeys.size()> members(all, kChatKeys);
  if (auto error = readModel(body, members, kModel, out)) return error;

  const JsonMember* messages = nullptr;
  if (auto error = members.take(kMessages, messages)) return error;
  if (messages == nullptr) {
    return ChatRequestError{"Missing required parameter: 'messages'.", "messages"};
  }
  if (messages->value.type != JsonType::kArray) {
    return invalidType("messages", "an array", *messages);
  }
  const std::string_view array = messages->value.span.in(body);
  if (array.find_first_not_of(" \t\r\n", 1) == array.size() - 1) {
    return ChatRequestError{
        "Invalid 'messages': empty array. Expected an array with minimum "
        "length 1, but got an empty array instead.",
        "messages"};
  }
  out.messages = messages->value.span;
  out.messageTextBytes = messages->value.stringBytes;

  const JsonMember* stream = nullptr;
  if (auto error = members.take(kStream, stream)) return error;
  if (stream != nullptr) {
    const auto value = parseBool(stream->value.span.in(body));
    if (!value) return invalidType("stream", "a boolean", *stream);
    out.stream = *value;
  }

  const JsonMember* streamOptions = nullptr;
  if (auto error = members.take(kStreamOptions, streamOptions)) return error;
  if (streamOptions != nullptr) {
    if (auto error = readStreamOptions(body, *streamOptions, out)) return error;
  } else if (const JsonMember* null = members.raw(kStreamOptions)) {
    out.streamOptions = null->value.span;  // an explicit null, overwritten by the rewrite
  }

  if (auto error = readTokenLimit(body, members, kMaxTokens, out.maxTokens)) return error;
  return readTokenLimit(body, members, kMaxCompletionTokens, out.maxCompletionTokens);
}

std::optional<ChatRequestError> readEmbeddingsRequest(std::string_view body, ChatRequestFields& out,
                                                      std::size_t& tokenIds) {
  out = ChatRequestFields{};
  tokenIds = 0;
  thread_local std::vector<JsonMember> all;
  if (auto error = readObject(body, all, out)) return error;
  const MemberIndex<kEmbeddingsKeys.size()> members(all, kEmbeddingsKeys);
  if (auto error = readModel(body, members, kEmbeddingsModel, out)) return error;

  const JsonMember* input = nullptr;
  if (auto error = members.take(kInput, input)) return error;
  if (input == nullptr) return ChatRequestError{"Missing required parameter: 'input'.", "input"};
  if (input->value.type == JsonType::kString) {
    if (input->value.span.length <= 2)
      return ChatRequestError{"'input' must not be empty.", "input"};
  } else if (input->value.type == JsonType::kArray) {
    const std::string_view array = input->value.span.in(body);
    if (array.find_first_not_of(" \t\r\n", 1) == array.size() - 1) {
      return ChatRequestError{
          "Invalid 'input': empty array. Expected an array with minimum "
          "length 1, but got an empty array instead.",
          "input"};
    }
    // Token ids given directly: one token each (digits outside strings).
    bool inString = false, escaped = false, inNumber = false;
    for (char c : array) {
      if (inString) {
        if (escaped)
          escaped = false;
        else if (c == '\\')
          escaped = true;
        else if (c == '"')
          inString = false;
        continue;
      }
      if (c == '"') {
        inString = true;
        inNumber = false;
        continue;
      }
      bool digit = c >= '0' && c <= '9';
      if (digit && !inNumber) ++tokenIds;
      inNumber = digit || (inNumber && (c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'));
    }
  } else {
    return invalidType("input", "a string or an array", *input);
  }
  out.messageTextBytes = input->value.stringBytes;
  return std::nullopt;
}

void rewriteChatRequest(std::string_view body, const ChatRequestFields& fields,
                        const ChatRewrite& rewrite, std::string& out) {
  // Every edit below targets a distinct range found by readChatRequest, so
  // none can overlap and the edit list cannot fill: the results are ignored.
  JsonSplice splice(body);
  std::string quotedModel;  // outlives the splice's view of it
  if (!rewrite.model.empty()) {
    const bool plain = rewrite.model.find_first_of("\"\\") == std::string_view::npos &&
                       std::none_of(rewrite.model.begin(), rewrite.model.end(),
                                    [](char c) { return static_cast<unsigned char>(c) < 0x20; });
    if (plain) {  // the common case: swap the bytes between the quotes
      (void)splice.replace({fields.modelValue.offset + 1, fields.modelValue.length - 2},
                           rewrite.model);
    } else {
      appendJsonString(quotedModel, rewrite.model);
      (void)splice.replace(fields.modelValue, quotedModel);
    }
  }
  if (rewrite.forceIncludeUsage && fields.stream && fields.includeUsage != true) {
    if (fields.streamOptionsType != JsonType::kObject) {
      if (fields.streamOptions.length != 0) {  // "stream_options": null
        (void)splice.replace(fields.streamOptions, R"({"include_usage":true})");
      } else {
        (void)splice.insert(fields.lastMemberEnd, R"(,"stream_options":{"include_usage":true})");
      }
    } else if (fields.includeUsageValue.length != 0) {  // false or null
      (void)splice.replace(fields.includeUsageValue, "true");
    } else if (fields.streamOptionsLastMemberEnd != 0) {
      (void)splice.insert(fields.streamOptionsLastMemberEnd, R"(,"include_usage":true)");
    } else {
      (void)splice.insert(fields.streamOptions.offset + 1, R"("include_usage":true)");
    }
  }
  splice.appendTo(out);
}

}  // namespace relay
