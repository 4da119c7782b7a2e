// An upstream's SSE stream: the parser (sse/parser.hpp), the usage reader
// (sse/usage.hpp) on every event's data, and StreamTransform (what the caller
// receives), each fed the same bytes split three ways — whole, at points the
// fuzzer chooses, and one byte at a time. However the reads fall, the events,
// the usage seen and what the caller receives must be the same; the caller
// receives nothing after [DONE], and usage only if it asked for it.
//
// Input: the stream bytes, optionally followed by 0xFF and read sizes (one
// byte each, cycled; 0 reads nothing). 0xFF never occurs in UTF-8, so a seed is
// a plain stream (corpus/sse/) and is then split at fixed sizes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "relay/common/json_scan.hpp"
#include "relay/pipeline/stream_transform.hpp"
#include "relay/sse/parser.hpp"
#include "relay/sse/usage.hpp"

namespace {

using relay::sse::Event;
using relay::sse::Parser;
using relay::sse::ParseStatus;

struct OwnedEvent {
  std::size_t end = 0;  // offset in the stream just past its raw bytes
  std::string raw, data, type, id;
  std::size_t dataLines = 0;
  bool hasId = false, hasComment = false;
  std::optional<std::uint64_t> retry;
};

struct ParseResult {
  std::vector<OwnedEvent> events;
  std::string complete;  // every completeBytes(), in order
  ParseStatus status = ParseStatus::kOk;
  std::size_t pending = 0;
  std::string lastEventId;
};

// Read sizes for one pass over the stream; a size of 0 feeds nothing.
class Reads {
 public:
  explicit Reads(std::string_view sizes) : sizes_(sizes) {}
  std::size_t next() {
    if (sizes_.empty()) {  // no choice given: a fixed irregular pattern
      constexpr std::size_t kPattern[] = {1, 7, 2, 64, 3, 19, 5, 300};
      return kPattern[at_++ % std::size(kPattern)];
    }
    return static_cast<std::uint8_t>(sizes_[at_++ % sizes_.size()]);
  }

 private:
  std::string_view sizes_;
  std::size_t at_ = 0;
};

template <typename Next>
ParseResult parseInReads(std::string_view stream, std::size_t maxEventBytes, Next nextSize) {
  Parser parser({.maxEventBytes = maxEventBytes});
  ParseResult r;
  std::size_t at = 0;
  std::size_t idle = 0;
  while (at < stream.size() && r.status == ParseStatus::kOk) {
    std::size_t n = std::min(nextSize(), stream.size() - at);
    if (n == 0 && ++idle > 64) n = 1;  // all-zero sizes must still make progress
    if (n != 0) idle = 0;
    parser.feed(stream.substr(at, n));
    at += n;
    r.status = parser.parse();
    std::size_t offset = 0;
    for (const Event& e : parser.events()) {
      FUZZ_CHECK(e.offset >= offset && e.offset + e.raw.size() <= parser.completeBytes().size(),
                 "events lie in order inside completeBytes()");
      FUZZ_CHECK(parser.completeBytes().substr(e.offset, e.raw.size()) == e.raw,
                 "an event's raw bytes are where its offset says");
      offset = e.offset + e.raw.size();
      r.events.push_back({r.complete.size() + offset, std::string(e.raw), std::string(e.data),
                          std::string(e.type), std::string(e.id), e.dataLines, e.hasId,
                          e.hasComment, e.retry});
    }
    r.complete.append(parser.completeBytes());
    parser.consume();
  }
  if (r.status == ParseStatus::kOk) {
    r.pending = parser.pendingBytes();
    FUZZ_CHECK(r.complete.size() + r.pending == stream.size(), "every byte is complete or pending");
  }
  r.lastEventId = parser.lastEventId();
  return r;
}

// Two parses of the same stream must agree. The one exception is the LF of a
// CRLF split across reads: when its CR ended a block, the LF is not part of
// that event's raw bytes but a byte of no event that follows it.
void expectSameParse(const ParseResult& a, const ParseResult& b) {
  FUZZ_CHECK(a.status == b.status, "parse status depends on read boundaries");
  FUZZ_CHECK(a.events.size() == b.events.size(), "event count depends on read boundaries");
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    const OwnedEvent& x = a.events[i];
    const OwnedEvent& y = b.events[i];
    const bool sameRaw = x.raw == y.raw || (x.raw.ends_with("\r\n") && x.raw == y.raw + "\n") ||
                         (y.raw.ends_with("\r\n") && y.raw == x.raw + "\n");
    FUZZ_CHECK(sameRaw, "event raw bytes depend on read boundaries");
    FUZZ_CHECK(x.data == y.data && x.type == y.type && x.id == y.id && x.dataLines == y.dataLines &&
                   x.hasId == y.hasId && x.hasComment == y.hasComment && x.retry == y.retry,
               "event fields depend on read boundaries");
  }
  if (a.status == ParseStatus::kOk) {
    FUZZ_CHECK(a.complete == b.complete, "complete bytes depend on read boundaries");
    FUZZ_CHECK(a.pending == b.pending, "pending bytes depend on read boundaries");
    FUZZ_CHECK(a.lastEventId == b.lastEventId, "last event id depends on read boundaries");
  }
}

// The usage reader's own promises, on one event's data.
void checkUsage(std::string_view data) {
  const std::optional<relay::sse::FoundUsage> found = relay::sse::extractUsage(data);
  if (!relay::sse::mayContainUsage(data)) {
    FUZZ_CHECK(!found, "mayContainUsage() said no, but extractUsage() found usage");
  }
  for (const auto& usage :
       {found ? std::optional(found->usage) : std::nullopt, relay::sse::extractBodyUsage(data)}) {
    if (!usage) continue;
    for (std::int64_t count : {usage->promptTokens, usage->completionTokens, usage->totalTokens,
                               usage->cachedTokens, usage->reasoningTokens}) {
      FUZZ_CHECK(count >= 0 && count <= relay::sse::kMaxUsageTokens, "a token count out of range");
    }
  }
  // The one-pass usage reader answers as the general one wherever it answers,
  // from any object in the data (a usage object inside a chunk included).
  std::size_t tried = 0;
  for (std::size_t open = data.find('{'); open != std::string_view::npos && tried < 64;
       open = data.find('{', open + 1), ++tried) {
    relay::sse::Usage quick;
    const std::size_t end = relay::sse::readUsageQuick(data, open, quick);
    if (end == std::string_view::npos) continue;
    relay::sse::Usage general;
    FUZZ_CHECK(end > open && end <= data.size() &&
                   relay::sse::readUsageObject(data, open, end - open, general),
               "readUsageQuick() accepted what the general reader refuses");
    FUZZ_CHECK(quick == general, "readUsageQuick() and the general reader disagree");
  }

  relay::sse::ChunkIdentity identity;
  const bool haveIdentity = relay::sse::readChunkIdentity(data, identity);

  std::string stripped;
  const bool removed = relay::sse::removeChoiceUsage(data, stripped);
  if (removed) {
    FUZZ_CHECK(!relay::validateJson(stripped), "removeChoiceUsage() must leave valid JSON");
  } else {
    FUZZ_CHECK(stripped.empty(), "removeChoiceUsage() appends nothing when it fails");
  }
  if (found && found->place == relay::sse::UsagePlace::kFirstChoice) {
    FUZZ_CHECK(removed, "usage found in choices[0] must be removable");
  }

  if (found && haveIdentity) {  // the chunk StreamTransform writes for Moonshot usage
    std::string chunk;
    relay::sse::appendUsageChunk(chunk, identity, found->usage);
    const auto again = relay::sse::extractUsage(chunk);
    FUZZ_CHECK(again && again->usage == found->usage && again->usageOnlyChunk &&
                   again->place == relay::sse::UsagePlace::kTopLevel,
               "a usage chunk we write must read back as the same usage");
    relay::sse::ChunkIdentity read;
    FUZZ_CHECK(relay::sse::readChunkIdentity(chunk, read) && read.id == identity.id &&
                   read.model == identity.model && read.created == identity.created,
               "a usage chunk we write must carry the stream's identity");
  }
}

struct TransformResult {
  std::string out;
  std::vector<std::string> outData;  // data of every event the caller receives
  bool failed = false, sawDone = false;
  std::uint64_t events = 0;
  std::optional<relay::sse::Usage> usage;
};

template <typename Next>
TransformResult transformInReads(std::string_view stream, bool callerWantsUsage, Next nextSize) {
  relay::pipeline::StreamTransform transform(callerWantsUsage);
  TransformResult r;
  std::size_t at = 0;
  std::size_t idle = 0;
  while (at < stream.size() && !transform.failed()) {
    std::size_t n = std::min(nextSize(), stream.size() - at);
    if (n == 0 && ++idle > 64) n = 1;
    if (n != 0) idle = 0;
    r.out.append(transform.push(stream.substr(at, n)));
    at += n;
  }
  r.failed = transform.failed();
  r.sawDone = transform.sawDone();
  r.events = transform.events();
  r.usage = transform.usage();
  // What the caller receives is itself a stream of whole events.
  Parser reader;
  reader.feed(r.out);
  FUZZ_CHECK(reader.parse() == ParseStatus::kOk, "the caller's stream must parse");
  FUZZ_CHECK(reader.pendingBytes() == 0, "the caller never receives part of an event");
  for (const Event& e : reader.events()) {
    if (!e.dispatches()) continue;
    FUZZ_CHECK(r.outData.empty() || r.outData.back() != "[DONE]",
               "nothing reaches the caller after [DONE]");
    FUZZ_CHECK(callerWantsUsage || !relay::sse::extractUsage(e.data),
               "usage reaches a caller who did not ask for it");
    r.outData.emplace_back(e.data);
  }
  return r;
}

void expectSameTransform(const TransformResult& a, const TransformResult& b) {
  FUZZ_CHECK(a.failed == b.failed && a.sawDone == b.sawDone && a.events == b.events,
             "StreamTransform state depends on read boundaries");
  FUZZ_CHECK(a.usage == b.usage, "usage seen depends on read boundaries");
  FUZZ_CHECK(a.outData == b.outData, "events the caller receives depend on read boundaries");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t marker = input.rfind('\xFF');
  const std::string_view stream = input.substr(0, marker);
  const std::string_view sizes =
      marker == std::string_view::npos ? std::string_view() : input.substr(marker + 1);
  // A small cap as well as the default, so the too-large path runs too.
  const std::size_t cap = sizes.empty() ? 4096 : 64 + static_cast<std::uint8_t>(sizes[0]) * 16;

  for (std::size_t maxEventBytes : {std::size_t{16} << 20, cap}) {
    const ParseResult whole = parseInReads(stream, maxEventBytes, [&] { return stream.size(); });
    Reads reads(sizes);
    expectSameParse(whole, parseInReads(stream, maxEventBytes, [&] { return reads.next(); }));
    if (stream.size() <= 1024) {
      expectSameParse(whole, parseInReads(stream, maxEventBytes, [] { return std::size_t{1}; }));
    }
    if (maxEventBytes == cap) continue;
    for (const OwnedEvent& e : whole.events)
      if (e.dataLines > 0) checkUsage(e.data);
  }

  for (bool callerWantsUsage : {false, true}) {
    const TransformResult one =
        transformInReads(stream, callerWantsUsage, [&] { return stream.size(); });
    Reads reads(sizes);
    expectSameTransform(one,
                        transformInReads(stream, callerWantsUsage, [&] { return reads.next(); }));
    if (stream.size() <= 1024) {
      expectSameTransform(
          one, transformInReads(stream, callerWantsUsage, [] { return std::size_t{1}; }));
    }
  }
  return 0;
}
