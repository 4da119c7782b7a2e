// What happens to an upstream SSE stream on its way to the caller.
//
// Events are forwarded whole, as they complete — never a partial event, so an
// error event appended after a failure is always a well-formed event of its
// own. Usage is read wherever the upstream puts it (OpenAI's usage-only chunk,
// Moonshot's choices[0].usage), and the caller sees exactly what it asked for:
// - the gateway asked for include_usage on the caller's behalf: the usage-only
//   chunk is consumed;
// - Moonshot's non-standard choices[0].usage is always removed from its
//   chunk, and a caller who asked for usage gets it in OpenAI's place, an
//   OpenAI-style usage-only chunk just before `data: [DONE]`;
// - a top-level usage object in a chunk that also carries choices reaches
//   only a caller who asked for usage.
// `data: [DONE]` ends the caller's stream: nothing after it is forwarded, and
// what is written before it depends only on what came before it, wherever
// the upstream's reads split the stream. Usage that follows it still counts.
// When no event needs changing (the common case) the parser's bytes go out
// untouched, in one write per upstream read.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "relay/sse/parser.hpp"
#include "relay/sse/usage.hpp"

namespace relay::pipeline {

class StreamTransform {
 public:
  // `callerWantsUsage`: the caller's own stream_options.include_usage.
  // `maxEventBytes`: the largest event held (upstreams[].max_event_bytes); a
  // longer one fails the stream, which the caller learns by an error event.
  explicit StreamTransform(bool callerWantsUsage, std::size_t maxEventBytes = kDefaultMaxEventBytes)
      : parser_(sse::ParserLimits{maxEventBytes}), callerWantsUsage_(callerWantsUsage) {}

  static constexpr std::size_t kDefaultMaxEventBytes = std::size_t{1} << 20;

  // Takes the next upstream bytes and returns what the caller must receive now
  // (possibly empty). The view is valid until the next push() or inbox().
  // On a malformed stream (an event over the size cap) returns empty and
  // failed() is true.
  std::string_view push(std::string_view bytes);

  // The same without a copy: the next upstream bytes are appended to
  // inbox() (the previous push's bytes are dropped as it is called), then
  // pushInbox() takes them.
  std::string& inbox() {
    parser_.consume();
    return parser_.inbox();
  }
  std::string_view pushInbox();

  bool failed() const { return failed_; }
  bool sawDone() const { return sawDone_; }
  // Bytes of an event the upstream started but never finished.
  std::size_t pendingBytes() const { return parser_.pendingBytes(); }
  // Data events seen so far, up to [DONE] (about one token each in a chat stream).
  std::uint64_t events() const { return events_; }
  const std::optional<sse::Usage>& usage() const { return usage_; }

 private:
  enum class Edit {
    kKeep,             // forwarded as received
    kDrop,             // the usage-only chunk the gateway asked for
    kReplace,          // replacement_'s data instead (usage removed)
    kUsageChunkFirst,  // replacement_'s data (a usage chunk), then the event ([DONE])
  };
  // What becomes of one event of a read: its bytes [offset, offset + length)
  // are replaced by editText_[at, at + textLength), followed by
  // the event itself when keepEvent (a usage chunk put before [DONE]).
  struct EventEdit {
    std::size_t offset;
    std::size_t length;
    std::size_t at;
    std::size_t textLength;
    bool keepEvent;
  };
  // A read of a chat stream has one event to change (the usage chunk) or
  // two: held without an allocation; more go to moreEdits_.
  static constexpr std::size_t kInPlaceEdits = 4;

  // Reads one event in stream order and says what the caller gets of it.
  Edit inspect(const sse::Event& event);
  void readLateUsage(const sse::Event& event);
  // pushInbox() but for dropping the read's events.
  std::string_view relay();
  // The read's bytes up to `end` with edits_ applied: in the parser's buffer
  // when no edit makes its event longer, else copied into out_.
  std::string_view applyEdits(std::size_t edits, bool grows, std::size_t end);

  sse::Parser parser_;
  EventEdit edits_[kInPlaceEdits];
  std::vector<EventEdit> moreEdits_;
  std::string editText_;  // the edits' new bytes, back to back
  std::string out_;
  std::string replacement_;
  std::optional<sse::Usage> usage_;
  bool usageInChoice_ = false;
  bool haveIdentity_ = false;
  sse::ChunkIdentity identity_;
  bool callerWantsUsage_;
  bool failed_ = false;
  bool sawDone_ = false;
  std::uint64_t events_ = 0;
};

}  // namespace relay::pipeline
