// The access log's JSON line, built by appending (no DOM, no float printing).
#include <charconv>
#include <ctime>
#include <limits>

#include "relay/common/json_write.hpp"
#include "relay/common/utf8.hpp"
#include "relay/telemetry/access_log.hpp"

namespace relay::telemetry {
namespace {

constexpr std::size_t kMaxTextBytes = 256;

// Length of the valid UTF-8 sequence at s[i] (utf8.hpp), or 0 when it is not valid.
std::size_t utf8Length(std::string_view s, std::size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  return utf8::sequenceLength(p + i, p + s.size());
}

// A JSON string of `s`: escaped (appendJsonString), with invalid UTF-8
// replaced by U+FFFD and cut at a character boundary after kMaxTextBytes, so a
// caller-influenced value (an upstream's error code, an unknown model id)
// cannot break the line or bloat it.
void appendText(std::string& out, std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && i < kMaxTextBytes) {
    std::size_t n = utf8Length(s, i);
    if (n == 0 || i + n > kMaxTextBytes) break;
    i += n;
  }
  if (i == s.size()) {  // the common case: short and valid
    appendJsonString(out, s);
    return;
  }
  std::string clean;
  clean.reserve(kMaxTextBytes + 8);
  for (i = 0; i < s.size();) {
    std::size_t n = utf8Length(s, i);
    std::string_view piece = n ? s.substr(i, n) : std::string_view("\xEF\xBF\xBD");
    if (clean.size() + piece.size() > kMaxTextBytes) {
      clean.append("\xE2\x80\xA6");  // "…": the value was cut
      break;
    }
    clean.append(piece);
    i += n ? n : 1;
  }
  appendJsonString(out, clean);
}

void appendTextOrNull(std::string& out, std::string_view s) {
  if (s.empty()) {
    out.append("null");
  } else {
    appendText(out, s);
  }
}

template <class Int>
void appendInt(std::string& out, Int v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Microseconds as milliseconds with three decimals, exactly; -1 → null.
void appendMillis(std::string& out, std::int64_t us) {
  if (us < 0) {
    out.append("null");
    return;
  }
  appendInt(out, us / 1000);
  const auto frac = static_cast<int>(us % 1000);
  out.push_back('.');
  out.push_back(static_cast<char>('0' + frac / 100));
  out.push_back(static_cast<char>('0' + frac / 10 % 10));
  out.push_back(static_cast<char>('0' + frac % 10));
}

void appendTwo(std::string& out, int v) {
  out.push_back(static_cast<char>('0' + v / 10 % 10));
  out.push_back(static_cast<char>('0' + v % 10));
}

std::string_view protocolName(Protocol p) {
  switch (p) {
    case Protocol::kHttp1:
      return "http/1.1";
    case Protocol::kHttp2:
      return "h2";
    case Protocol::kUnknown:
      break;
  }
  return {};
}

}  // namespace

void appendRfc3339Millis(std::string& out, std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
  const auto secs = static_cast<std::time_t>(ms / 1000 - (ms % 1000 < 0 ? 1 : 0));
  const int milli = static_cast<int>((ms % 1000 + 1000) % 1000);
  // gmtime_r costs more than the rest of the line: reuse the last second's text.
  thread_local std::time_t cachedSecs = std::numeric_limits<std::time_t>::min();
  thread_local std::string cached;
  if (secs != cachedSecs) {
    std::tm tm{};
    gmtime_r(&secs, &tm);
    cached.clear();
    appendInt(cached, tm.tm_year + 1900);
    cached.push_back('-');
    appendTwo(cached, tm.tm_mon + 1);
    cached.push_back('-');
    appendTwo(cached, tm.tm_mday);
    cached.push_back('T');
    appendTwo(cached, tm.tm_hour);
    cached.push_back(':');
    appendTwo(cached, tm.tm_min);
    cached.push_back(':');
    appendTwo(cached, tm.tm_sec);
    cachedSecs = secs;
  }
  out.append(cached);
  out.push_back('.');
  out.push_back(static_cast<char>('0' + milli / 100));
  appendTwo(out, milli % 100);
  out.push_back('Z');
}

void appendAccessLine(std::string& out, const RequestRecord& r, const Settlement& settled,
                      std::string_view nodeLabel, const DisplayCurrency& currency,
                      std::chrono::system_clock::time_point at) {
  out.append("{\"time\":\"");
  appendRfc3339Millis(out, at);
  out.append("\",\"request_id\":");
  appendTextOrNull(out, r.requestId);
  out.append(",\"trace_id\":");
  appendTextOrNull(out, r.traceId);
  out.append(",\"span_id\":");
  appendTextOrNull(out, r.spanId);
  out.append(",\"key\":");
  appendTextOrNull(out, r.keyName);
  out.append(",\"model\":");
  appendTextOrNull(out, r.model);
  out.append(",\"upstream\":");
  appendTextOrNull(out, r.upstream);
  out.append(",\"region\":");
  appendTextOrNull(out, r.region);
  out.append(",\"node\":");
  appendTextOrNull(out, nodeLabel == kNoneLabel ? std::string_view() : nodeLabel);
  out.append(",\"status\":");
  appendInt(out, r.status);
  out.append(",\"attempts\":");
  appendInt(out, r.attempts);
  out.append(",\"duration_ms\":");
  appendMillis(out, r.durationUs);
  out.append(",\"ttft_ms\":");
  appendMillis(out, r.ttftUs);
  out.append(",\"upstream_ms\":");
  appendMillis(out, r.upstreamUs);
  out.append(",\"prompt_tokens\":");
  appendInt(out, r.usage.promptTokens);
  out.append(",\"cached_tokens\":");
  appendInt(out, r.usage.cachedTokens);
  out.append(",\"completion_tokens\":");
  appendInt(out, r.usage.completionTokens);
  out.append(r.usageEstimated ? ",\"usage_estimated\":true" : ",\"usage_estimated\":false");
  out.append(",\"cost_usd\":");
  appendUsd(out, settled.cost);
  out.append(settled.priced ? ",\"priced\":true" : ",\"priced\":false");
  if (!currency.isUsd()) {
    out.append(",\"cost\":");
    appendConverted(out, settled.cost, currency.perUsd);
    out.append(",\"currency\":");
    appendText(out, currency.code);
  }
  out.append(",\"error_code\":");
  appendTextOrNull(out, r.errorCode);
  out.append(",\"fallback_model\":");
  appendTextOrNull(out, r.fallbackModel);
  out.append(",\"protocol\":");
  appendTextOrNull(out, protocolName(r.protocol));
  out.append(r.stream ? ",\"stream\":true}" : ",\"stream\":false}");
}

}  // namespace relay::telemetry
