// Formatting the SSE events the gateway writes itself (the relayed ones are
// forwarded byte for byte from the parser's buffer). All functions append to a
// caller-owned buffer so a batch of events leaves in one write.
#pragma once

#include <string>
#include <string_view>

namespace relay::sse {

// The OpenAI stream terminator.
inline constexpr std::string_view kDoneEvent = "data: [DONE]\n\n";

// `data: <payload>\n\n`. A payload holding line breaks (LF, CRLF or CR)
// becomes one `data:` line per line, which a client joins back with LF — the
// only representation SSE has for them. JSON payloads from json_write or the
// upstream have none.
void appendData(std::string& out, std::string_view payload);

// `: <text>\n\n` — a comment, e.g. a keep-alive; clients ignore it. Line breaks
// in `text` start new comment lines.
void appendComment(std::string& out, std::string_view text);

void appendDone(std::string& out);

// Reports a failure after the response has started, the way the OpenAI SDKs
// understand it (a data payload with a top-level `error` makes them throw):
// `data: {"error":{"message":…,"type":…,"param":null,"code":…}}\n\n`.
// An empty `code` is written as null; a `traceId` adds "trace_id". The caller
// closes the stream afterwards.
void appendError(std::string& out, std::string_view message, std::string_view type = "server_error",
                 std::string_view code = {}, std::string_view traceId = {});

}  // namespace relay::sse
