// Writing JSON text without a DOM: the few places that build small bodies
// (errors, SSE error events) append to a string directly.
#pragma once

#include <string>
#include <string_view>

namespace relay {

// Appends `s` as a JSON string literal (quoted, escaped). `s` is taken as UTF-8;
// control characters become \u00XX.
void appendJsonString(std::string& out, std::string_view s);

// {"error":{"message":...,"type":...,"param":<param or null>,"code":<code or null>}}
// — OpenAI's error object; all four keys are always present. An empty `param`
// or `code` is written as null.
std::string openAiErrorJson(std::string_view message, std::string_view type,
                            std::string_view code = {}, std::string_view param = {});

}  // namespace relay
