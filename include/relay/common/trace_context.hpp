// W3C Trace Context (https://www.w3.org/TR/trace-context/, Level 1) for the
// gateway: it continues a caller's trace, or starts one, and is one span in
// it. Pure text handling: no sockets, no clock.
//
//   traceparent: 00-<trace-id: 32 hex>-<parent-id: 16 hex>-<flags: 2 hex>
//   tracestate:  vendor=value,other@tenant=value   (at most 32 list-members)
//
// What the gateway does with them (docs/tracing.md):
//   - a valid traceparent from the caller: same trace id and flags, a new span
//     id of the gateway's own; the caller's span id is the gateway's parent;
//   - absent or invalid (any rule below broken, or the field sent twice): a
//     new trace id and span id, flags 01 (the gateway records every request
//     in its access log), and tracestate dropped, as the spec asks;
//   - upstreams and MCP servers get "00-<trace-id>-<gateway span id>-<flags>"
//     and the caller's tracestate when it was valid.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "relay/common/headers.hpp"
#include "relay/common/inline_string.hpp"

namespace relay {

// The fields of a traceparent value that passed validation.
struct Traceparent {
  InlineString<32> traceId;   // 32 lowercase hex digits, not all zero
  InlineString<16> parentId;  // 16 lowercase hex digits, not all zero
  std::uint8_t flags = 0;
};

// Parses one traceparent value as the spec's rules for a receiver say:
// version 00 must be exactly 55 characters; a later version (01-fe) is read
// by its first four fields when it is at least 55 long and, if longer,
// continues with '-'; version ff is invalid; hex is lowercase only; neither id
// may be all zeros. nullopt when invalid.
std::optional<Traceparent> parseTraceparent(std::string_view value);

// A tracestate value (the caller's fields joined with ',') checked against the
// spec's grammar: list-members "key=value" separated by commas with optional
// spaces or tabs, empty members allowed and dropped, at most 32 members, no
// key twice. Keys: lcalpha then up to 255 of [a-z0-9_*/-], or
// tenant@system (tenant: up to 241 of those, starting with a letter or digit;
// system: up to 14, starting with a letter). Values: up to 256 printable
// ASCII characters except ',' and '=', not ending in a space. Returns the
// members joined with ',' (whitespace removed); when the result exceeds 512
// characters, members longer than 128 go first, then members from the end,
// as the spec allows. nullopt when invalid; "" when there is nothing left.
std::optional<std::string> normaliseTracestate(std::string_view value);

// Fresh ids from a per-thread generator: 32 or 16 lowercase hex digits,
// never all zeros.
std::string newTraceId();
std::string newSpanId();

// The gateway's place in a trace, for one request.
struct TraceContext {
  // (Held inline: a request makes these without a heap allocation.)
  InlineString<32> traceId;   // 32 hex: the caller's, or a new one
  InlineString<16> spanId;    // 16 hex: the gateway's own span for this request
  InlineString<16> parentId;  // the caller's span id; "" when the trace started here
  std::uint8_t flags = 1;     // the caller's (only the sampled bit is kept), or 01
  std::string tracestate;     // validated; "" = none to pass on

  bool continued() const { return !parentId.empty(); }
  // "00-<traceId>-<spanId>-<flags>": what upstreams get (the gateway's span is
  // their parent) and what the caller gets back in the response's traceparent.
  InlineString<55> traceparent() const;
};

// The request's trace: the caller's continued when its traceparent is valid
// (and sent once), else a new one. Every traceparent and tracestate field of
// `headers` is looked at (several tracestate fields are joined with ',').
TraceContext traceFrom(const Headers& headers);

}  // namespace relay
