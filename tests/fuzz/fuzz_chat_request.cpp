// The chat completion request a caller sends: readChatRequest on any bytes,
// and for every body it accepts, rewriteChatRequest with several upstream
// model ids and forceIncludeUsage both ways. The forwarded body must itself be
// accepted, name the new model, keep every other field the gateway reads, and
// report usage when the gateway forced it on a streamed request.
//
// Input: the request body. Seeds: corpus/chat_request/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "relay/common/chat_request.hpp"

namespace {

// Upstream model ids: plain (spliced between the quotes), one that needs JSON
// escapes (re-encoded whole), non-ASCII, and none (the client's model kept).
constexpr std::string_view kModels[] = {
    "kimi-k2-0905-preview",
    "we\"ird\\model\x01\x1f/\t",
    "\xE6\xA8\xA1\xE5\x9E\x8B-\xF0\x9F\x9A\x80",
    "",
};

void checkRewrite(std::string_view body, const relay::ChatRequestFields& in, std::string_view model,
                  bool forceIncludeUsage) {
  std::string out = "prefix that appendTo must keep";
  const std::size_t prefix = out.size();
  relay::rewriteChatRequest(body, in, {model, forceIncludeUsage}, out);
  FUZZ_CHECK(out.compare(0, prefix, "prefix that appendTo must keep") == 0,
             "rewriteChatRequest must append, not overwrite");
  const std::string_view forwarded = std::string_view(out).substr(prefix);

  relay::ChatRequestFields again;
  const auto error = relay::readChatRequest(forwarded, again);
  FUZZ_CHECK(!error, error ? error->message : "");
  FUZZ_CHECK(again.model == (model.empty() ? in.model : std::string(model)),
             "the forwarded body must carry the upstream model id");
  FUZZ_CHECK(again.messages.in(forwarded) == in.messages.in(body),
             "messages must go upstream byte for byte");
  FUZZ_CHECK(again.stream == in.stream, "stream must not change");
  FUZZ_CHECK(again.maxTokens == in.maxTokens, "max_tokens must not change");
  FUZZ_CHECK(again.maxCompletionTokens == in.maxCompletionTokens,
             "max_completion_tokens must not change");
  if (forceIncludeUsage && in.stream) {
    FUZZ_CHECK(again.includeUsage == true, "forced include_usage must be true upstream");
  } else {
    FUZZ_CHECK(again.includeUsage == in.includeUsage, "include_usage must not change");
    FUZZ_CHECK(again.streamOptionsType == in.streamOptionsType, "stream_options must not change");
  }
  if (model.empty() && !(forceIncludeUsage && in.stream && in.includeUsage != true)) {
    FUZZ_CHECK(forwarded == body, "a rewrite with nothing to change must copy the body");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  relay::ChatRequestFields fields;
  if (relay::readChatRequest(body, fields)) return 0;  // refused with a 400: fine

  FUZZ_CHECK(!fields.model.empty(), "an accepted request has a model");
  FUZZ_CHECK(fields.body.end() <= body.size() && fields.modelValue.end() <= body.size() &&
                 fields.messages.end() <= body.size() && fields.lastMemberEnd <= body.size(),
             "spans must lie inside the body");
  for (std::string_view model : kModels) {
    checkRewrite(body, fields, model, false);
    checkRewrite(body, fields, model, true);
  }
  return 0;
}
