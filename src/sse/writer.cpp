#include "relay/sse/writer.hpp"

#include "relay/common/json_write.hpp"

namespace relay::sse {

namespace {

// Writes each line of `text` as `<prefix><line>\n`, splitting on LF, CRLF and
// CR exactly as a parser will, then the blank line that ends the event.
void appendLines(std::string& out, std::string_view prefix, std::string_view text) {
  std::size_t at = 0;
  for (;;) {
    const std::size_t end = text.find_first_of("\r\n", at);
    out.append(prefix).append(text.substr(at, end - at)).push_back('\n');
    if (end == std::string_view::npos) break;
    at = end + 1;
    if (text[end] == '\r' && at < text.size() && text[at] == '\n') ++at;
  }
  out.push_back('\n');
}

}  // namespace

void appendData(std::string& out, std::string_view payload) {
  out.reserve(out.size() + payload.size() + 8);
  appendLines(out, "data: ", payload);
}

void appendComment(std::string& out, std::string_view text) {
  appendLines(out, ": ", text);
}

void appendDone(std::string& out) {
  out.append(kDoneEvent);
}

void appendError(std::string& out, std::string_view message, std::string_view type,
                 std::string_view code, std::string_view traceId) {
  appendData(out, openAiErrorJson(message, type, code, {}, traceId));
}

}  // namespace relay::sse
