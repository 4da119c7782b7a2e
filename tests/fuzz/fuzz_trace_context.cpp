// W3C trace context (common/trace_context.hpp) on caller-controlled bytes:
// the traceparent and tracestate a caller sends reach parseTraceparent,
// normaliseTracestate and traceFrom unchanged.
//
// Input: a traceparent value, optionally followed by LF and a tracestate
// value (a header value holds no LF). Seeds: corpus/trace_context/.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "relay/common/trace_context.hpp"

namespace {

bool lowerHex(std::string_view s, std::size_t size) {
  if (s.size() != size) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return s.find_first_not_of('0') != std::string_view::npos;  // not all zeros
}

void checkTracestate(std::string_view value) {
  const std::optional<std::string> out = relay::normaliseTracestate(value);
  if (!out) return;
  FUZZ_CHECK(out->size() <= 512, "a tracestate passed on is at most 512 characters");
  FUZZ_CHECK(out->find_first_of("\t\r\n") == std::string::npos &&
                 out->find(", ") == std::string::npos && out->find(" ,") == std::string::npos &&
                 !out->starts_with(' ') && !out->ends_with(' '),
             "no whitespace around list-members");
  // What the gateway sends is valid and stays the same when read again.
  const std::optional<std::string> again = relay::normaliseTracestate(*out);
  FUZZ_CHECK(again && *again == *out, "a normalised tracestate reads back unchanged");
  std::size_t members = out->empty() ? 0 : 1;
  for (char c : *out)
    members += c == ',';
  FUZZ_CHECK(members <= 32, "at most 32 list-members");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t lf = input.find('\n');
  const std::string_view parent = input.substr(0, lf);
  const std::string_view state =
      lf == std::string_view::npos ? std::string_view() : input.substr(lf + 1);

  if (const std::optional<relay::Traceparent> t = relay::parseTraceparent(parent)) {
    FUZZ_CHECK(lowerHex(t->traceId, 32) && lowerHex(t->parentId, 16), "ids are hex, not all zeros");
    FUZZ_CHECK(parent.size() >= 55 && parent.substr(3, 32) == t->traceId,
               "the trace id is the field");
    FUZZ_CHECK(parent.substr(0, 2) != "ff", "version ff is invalid");
  }
  checkTracestate(parent);
  checkTracestate(state);

  relay::Headers headers;
  headers.add("traceparent", parent);
  if (lf != std::string_view::npos) headers.add("tracestate", state);
  const relay::TraceContext trace = relay::traceFrom(headers);
  const std::optional<relay::Traceparent> sent = relay::parseTraceparent(trace.traceparent());
  FUZZ_CHECK(sent && sent->traceId == trace.traceId && sent->parentId == trace.spanId,
             "what the gateway sends is a valid traceparent naming its own span");
  FUZZ_CHECK(trace.traceparent().size() == 55 && trace.traceparent().view().starts_with("00-"),
             "the gateway sends version 00");
  FUZZ_CHECK(trace.flags <= 1, "only the sampled flag goes on");
  if (trace.continued()) {
    const std::optional<relay::Traceparent> given =
        relay::parseTraceparent(relay::trimWhitespace(parent));
    FUZZ_CHECK(given && given->traceId == trace.traceId && given->parentId == trace.parentId,
               "a continued trace keeps the caller's ids");
  } else {
    FUZZ_CHECK(trace.tracestate.empty(), "a new trace passes on no tracestate");
  }
  if (!trace.tracestate.empty()) {
    const std::optional<std::string> again = relay::normaliseTracestate(trace.tracestate);
    FUZZ_CHECK(again && *again == trace.tracestate, "the tracestate sent is valid");
  }
  return 0;
}
