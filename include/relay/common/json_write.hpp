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
// or `code` is written as null. A `traceId` adds "trace_id" after them (the
// W3C trace of the request, docs/tracing.md); SDKs keep unknown fields.
std::string openAiErrorJson(std::string_view message, std::string_view type,
                            std::string_view code = {}, std::string_view param = {},
                            std::string_view traceId = {});

// Adds "trace_id" to an error body openAiErrorJson wrote (one that ends with
// "}}"); other bodies, and an empty `traceId`, are left as they are.
void addTraceIdToError(std::string& body, std::string_view traceId);

}  // namespace relay
