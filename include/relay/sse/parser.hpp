// Incremental Server-Sent Events parser for relaying an upstream stream.
//
// Follows the WHATWG HTML "event stream interpretation" rules: lines end in
// CRLF, LF or CR (a CR at the end of one read and an LF at the start of the
// next are one line end), a leading U+FEFF is skipped, ':' lines are comments,
// `data` lines join with LF, `event`/`id`/`retry` set their fields, unknown
// fields are ignored, and a blank line ends an event.
//
// Built for forwarding without copies: the reader appends straight to the
// parser's buffer (inbox()), parse() finds the complete events, and the
// bytes of all of them sit contiguously at the front of the buffer
// (completeBytes()) so the relay can write them in one call, then consume().
// Each event also exposes its own raw bytes and decoded fields for inspection
// (usage, [DONE], errors). Nothing is allocated per event once the buffers
// have grown to the stream's working size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace relay::sse {

// One blank-line-terminated block of the stream. Views point into the parser
// and stay valid until its next feed(), consume(), dropEvents() or reset(),
// or an append to its inbox().
struct Event {
  std::string_view raw;    // exact bytes as received, terminating blank line included
  std::size_t offset = 0;  // of `raw` within completeBytes()

  std::string_view data;  // data lines joined with LF (no trailing LF)
  std::size_t dataLines = 0;
  std::string_view type;  // `event` field; empty means "message"
  std::string_view id;    // `id` field of this block (see hasId)
  bool hasId = false;
  std::optional<std::uint64_t> retry;  // `retry` field in ms, when all digits
  bool hasComment = false;             // contains a ':' line (e.g. a keep-alive)

  // Per WHATWG, only a block with at least one data line dispatches a message;
  // the rest (comments, a bare id or retry) still has to be forwarded.
  bool dispatches() const { return dataLines > 0; }
};

enum class ParseStatus : std::uint8_t {
  kOk,
  kEventTooLarge,  // an event grew past ParserLimits::maxEventBytes; the parser is failed
};

struct ParserLimits {
  // Largest event (raw bytes, not counting the LF of a final CRLF) the parser
  // will hold: a peer that never ends an event must not grow the buffer
  // without bound.
  std::size_t maxEventBytes = std::size_t{16} << 20;
};

class Parser {
 public:
  explicit Parser(ParserLimits limits = {});

  // The buffer, for a reader to append the next bytes to (an HTTP body
  // parser appends a read's body bytes straight here). The next parse()
  // takes them. Its bytes are the parser's: append only.
  std::string& inbox() { return buffer_; }
  // Appends `bytes` to the buffer.
  void feed(std::string_view bytes);

  // Parses what was appended since the last call. Newly complete events are
  // appended to events() and their bytes to completeBytes(). After an error
  // every call returns the same error.
  ParseStatus parse();

  // All complete blocks since the last consume(), in order.
  const std::vector<Event>& events() const { return events_; }
  // The front of the buffer: every complete event back to back, plus bytes
  // that belong to no event (a BOM, extra blank lines, the LF of a CRLF split
  // across reads). Forwarding these bytes forwards the stream unchanged.
  std::string_view completeBytes() const { return {buffer_.data(), complete_}; }
  // The same bytes, writable: a relay that removes or shortens events edits
  // them in place rather than copying the read. The views of events() do
  // not follow such edits; consume() drops these bytes as usual.
  std::span<char> completeBytesForEdit() { return {buffer_.data(), complete_}; }
  // Drops completeBytes() and events(); the incomplete tail moves to the front.
  void consume();
  // Drops events() only (completeBytes() stays until consume()), and gives
  // their lists' memory back when they grew past room for kEventsKept
  // events (a read that brought more, or a read of events under 128 bytes
  // whose lists doubled past it): for a caller done with the events of a
  // read before it waits (one that relays the read), so that a burst's
  // lists do not stay with a stream while it waits on its caller or its
  // upstream.
  void dropEvents();
  // Events a parser's lists keep room for between reads.
  static constexpr std::size_t kEventsKept = 64;

  // Bytes of the event still in progress (discarded at end of stream, per
  // WHATWG; a non-zero value there means the upstream cut an event short).
  std::size_t pendingBytes() const { return buffer_.size() - complete_; }
  // The last `id` seen on the stream (persists across events, per WHATWG).
  const std::string& lastEventId() const { return lastEventId_; }
  ParseStatus status() const { return status_; }
  void reset();

 private:
  // Field state of the event in progress; offsets are relative to its start,
  // so they survive consume() moving it to the front.
  struct Pending {
    std::size_t dataLines = 0;
    std::size_t firstDataOffset = 0;
    std::size_t firstDataLength = 0;
    std::size_t typeOffset = 0;
    std::size_t typeLength = 0;
    std::size_t idOffset = 0;
    std::size_t idLength = 0;
    bool hasId = false;
    std::optional<std::uint64_t> retry;
    bool hasComment = false;
    bool hasLines = false;
  };

  // Where an event's views point, as offsets: raw, type and id relative to
  // the event's start in the buffer, data there too or in joined_.
  struct EventSpans {
    std::size_t rawLength = 0;
    std::size_t dataOffset = 0;
    std::size_t dataLength = 0;
    bool dataJoined = false;
    std::size_t typeOffset = 0;
    std::size_t typeLength = 0;
    std::size_t idOffset = 0;
    std::size_t idLength = 0;
  };

  bool skipBom();
  void scanLines();
  void processLine(std::size_t lineStart, std::size_t lineEnd);
  void finishEvent(std::size_t end);
  void joinData(EventSpans& spans, std::size_t start, std::size_t end);
  void rebuildViews();

  ParserLimits limits_;
  std::string buffer_;
  std::size_t size_ = 0;      // bytes of buffer_ the last parse() took
  std::size_t complete_ = 0;  // front bytes that form complete blocks
  std::size_t scanned_ = 0;   // bytes already examined by parse()
  std::size_t lineStart_ = 0;
  bool skipLf_ = false;  // the previous line ended in a CR at the end of a read
  bool bomChecked_ = false;
  ParseStatus status_ = ParseStatus::kOk;
  Pending pending_;
  std::vector<Event> events_;
  std::vector<EventSpans> spans_;  // parallel to events_
  std::string joined_;  // data of multi-line events, joined; views fixed up after parse()
  std::string lastEventId_;
};

}  // namespace relay::sse
