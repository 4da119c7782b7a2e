#include "relay/common/json_write.hpp"

#include <cstdio>

namespace relay {

void appendJsonString(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out.append(buf);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

std::string openAiErrorJson(std::string_view message, std::string_view type, std::string_view code,
                            std::string_view param, std::string_view traceId) {
  std::string out;
  out.reserve(64 + message.size());
  out.append("{\"error\":{\"message\":");
  appendJsonString(out, message);
  out.append(",\"type\":");
  appendJsonString(out, type);
  out.append(",\"param\":");
  if (param.empty())
    out.append("null");
  else
    appendJsonString(out, param);
  out.append(",\"code\":");
  if (code.empty())
    out.append("null");
  else
    appendJsonString(out, code);
  if (!traceId.empty()) {
    out.append(",\"trace_id\":");
    appendJsonString(out, traceId);
  }
  out.append("}}");
  return out;
}

void addTraceIdToError(std::string& body, std::string_view traceId) {
  if (traceId.empty() || !body.starts_with("{\"error\":{") || !body.ends_with("}}")) return;
  if (body.find("\"trace_id\":") != std::string::npos) return;  // has one already
  std::string field = ",\"trace_id\":";
  appendJsonString(field, traceId);
  body.insert(body.size() - 2, field);
}

}  // namespace relay
