// Fault specs of the mock upstream: what should go wrong with a response.
//
// A spec is a ';'-separated list of items, e.g. "status=503;retry_after=1" or
// "reset_after=3". It arrives from `--fault`, from `POST /_mock/fault` or from a
// request's `x-mock-fault` header. Pure logic: no sockets, no clocks, so the
// parser is tested alone (tests/unit/mock/fault_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace relay::mock {

struct FaultSpec {
  // At most one of these "actions" is set; none means "answer normally"
  // (possibly after `firstByteDelayMs`).
  std::optional<int> status;                      // error status 400..599, OpenAI/Moonshot body
  bool hang = false;                              // never answer; wait for the client to leave
  bool reset = false;                             // abort before any response byte
  std::optional<std::uint32_t> resetAfterChunks;  // stream this many chunks, then abort
  // A 200 whose body is this many bytes: with content-length (body_bytes) or
  // chunked (body_bytes_chunked); for the relay's max_response_bytes.
  std::optional<std::uint32_t> bodyBytes;
  bool bodyChunked = false;
  // A stream whose first event is this many bytes (event_bytes): for max_event_bytes.
  std::optional<std::uint32_t> eventBytes;

  // Only with `status`.
  std::optional<std::uint32_t> retryAfterSeconds;  // Retry-After: N
  std::optional<std::uint32_t> retryAfterMs;       // retry-after-ms: N
  std::string errorType;                           // overrides the status's default type

  std::uint32_t firstByteDelayMs = 0;  // applies before whatever comes next
  std::optional<std::uint32_t> times;  // run-wide specs only: the next N requests

  // True when the spec changes nothing (e.g. an empty `x-mock-fault` header,
  // which deliberately overrides a run-wide fault with "no fault").
  bool isNoop() const;
};

struct FaultParseResult {
  FaultSpec spec;
  std::string error;  // empty on success; otherwise names the offending item
  bool ok() const { return error.empty(); }
};

// Parses a spec. Items are trimmed and empty items skipped; unknown keys,
// repeated keys, bad numbers and contradictory actions are errors.
FaultParseResult parseFaultSpec(std::string_view text);

// The canonical text of a spec (items in a fixed order), for GET /_mock/fault.
std::string describeFault(const FaultSpec& spec);

}  // namespace relay::mock
