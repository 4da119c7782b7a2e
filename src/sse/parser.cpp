#include "relay/sse/parser.hpp"

#include <algorithm>
#include <cstring>

#include "relay/common/read_room.hpp"

namespace relay::sse {

namespace {

constexpr std::string_view kBom = "\xEF\xBB\xBF";

// Offset of the first CR or LF in [from, end), or `end`. memchr twice beats a
// byte loop: data lines are long and hold no raw CR or LF.
std::size_t findLineEnd(const char* base, std::size_t from, std::size_t end) {
  const void* lf = std::memchr(base + from, '\n', end - from);
  const std::size_t lfAt = lf ? static_cast<std::size_t>(static_cast<const char*>(lf) - base) : end;
  const void* cr = std::memchr(base + from, '\r', lfAt - from);
  return cr ? static_cast<std::size_t>(static_cast<const char*>(cr) - base) : lfAt;
}

// Splits a non-blank line into field name and value: "name: value" -> (name,
// value), "name:value" keeps the value whole, a line without ':' is a field
// with an empty value. Only one space after the colon is removed. The value
// always points into the line, even when empty: callers turn its address into
// an offset in the buffer (an empty `{}` has a null data()).
void splitField(std::string_view line, std::string_view& field, std::string_view& value) {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) {
    field = line;
    value = line.substr(line.size());
    return;
  }
  field = line.substr(0, colon);
  value = line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
}

std::optional<std::uint64_t> parseRetry(std::string_view value) {
  if (value.empty() || value.size() > 19) return std::nullopt;  // 19 digits fit in 64 bits
  std::uint64_t ms = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    ms = ms * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return ms;
}

}  // namespace

Parser::Parser(ParserLimits limits) : limits_(limits) {}

void Parser::feed(std::string_view bytes) {
  if (bytes.empty()) return;
  reserveForRead(buffer_, bytes.size());
  buffer_.append(bytes);
}

void Parser::consume() {
  const std::size_t tail = buffer_.size() - complete_;
  if (tail != 0 && complete_ != 0) std::memmove(buffer_.data(), buffer_.data() + complete_, tail);
  buffer_.resize(tail);
  size_ -= complete_;
  scanned_ -= complete_;
  lineStart_ -= complete_;
  complete_ = 0;  // Pending offsets are relative to the event start: still valid
  events_.clear();
  spans_.clear();
  joined_.clear();
}

void Parser::dropEvents() {
  if (events_.capacity() > kEventsKept) {
    std::vector<Event>().swap(events_);  // (`= {}` would keep the room)
    std::vector<EventSpans>().swap(spans_);
  } else {
    events_.clear();
    spans_.clear();
  }
  joined_.clear();
}

void Parser::reset() {
  buffer_.clear();
  size_ = complete_ = scanned_ = lineStart_ = 0;
  skipLf_ = bomChecked_ = false;
  status_ = ParseStatus::kOk;
  pending_ = Pending{};
  events_.clear();
  spans_.clear();
  joined_.clear();
  lastEventId_.clear();
}

ParseStatus Parser::parse() {
  size_ = buffer_.size();
  // Room for the events these bytes may hold, at once (a provider's chunk is
  // 128 bytes or more): a read that brings a whole stream's events grows the
  // lists once, not by doubling from one. Capped: what a read of tiny events
  // needs beyond it still grows by doubling.
  const std::size_t guess = std::min<std::size_t>((size_ - scanned_) / 128 + 1, kEventsKept);
  if (status_ == ParseStatus::kOk && events_.capacity() < guess) {
    events_.reserve(guess);
    spans_.reserve(guess);
  }
  if (status_ == ParseStatus::kOk && skipBom()) scanLines();
  if (status_ == ParseStatus::kOk && size_ - complete_ > limits_.maxEventBytes) {
    status_ = ParseStatus::kEventTooLarge;
  }
  rebuildViews();
  return status_;
}

// Only the stream's first bytes can be a BOM: false while fewer than three
// bytes are here and they could still be one. A BOM counts as complete bytes
// that belong to no event.
bool Parser::skipBom() {
  if (bomChecked_) return true;
  const std::size_t have = std::min(size_, kBom.size());
  if (std::string_view(buffer_.data(), have) != kBom.substr(0, have)) {
    bomChecked_ = true;
  } else if (have == kBom.size()) {
    bomChecked_ = true;
    complete_ = scanned_ = lineStart_ = kBom.size();
  }
  return bomChecked_;
}

void Parser::scanLines() {
  const char* base = buffer_.data();
  // Where the next CR is, at or after scanned_: searched for once and reused
  // while lines end before it. A stream whose lines end in LF alone (every
  // provider's) then costs one CR search per read, not one per line.
  std::size_t nextCr = 0;
  bool crKnown = false;
  while (scanned_ < size_) {
    if (skipLf_) {  // the LF of a CRLF whose CR ended the previous read
      skipLf_ = false;
      if (base[scanned_] == '\n') {
        // After a CR that ended a block this LF belongs to no event.
        if (complete_ == lineStart_) complete_ = scanned_ + 1;
        lineStart_ = ++scanned_;
        continue;
      }
    }
    // The blank line that ends an event nearly always follows its data line
    // at once: taken here, without a search.
    if (base[scanned_] == '\n' && scanned_ == lineStart_) {
      lineStart_ = ++scanned_;
      finishEvent(scanned_);
      if (status_ != ParseStatus::kOk) return;
      continue;
    }
    if (!crKnown || nextCr < scanned_) {
      const void* cr = std::memchr(base + scanned_, '\r', size_ - scanned_);
      nextCr = cr ? static_cast<std::size_t>(static_cast<const char*>(cr) - base) : size_;
      crKnown = true;
    }
    const void* lf = std::memchr(base + scanned_, '\n', nextCr - scanned_);
    const std::size_t lineEnd =
        lf ? static_cast<std::size_t>(static_cast<const char*>(lf) - base) : nextCr;
    if (lineEnd == size_) {
      scanned_ = size_;  // an incomplete line: resume here, not at its start
      return;
    }
    std::size_t next = lineEnd + 1;
    if (base[lineEnd] == '\r') {
      if (next < size_) {
        if (base[next] == '\n') ++next;
      } else {
        skipLf_ = true;  // the LF, if any, comes with the next read
      }
    }
    const bool blank = lineEnd == lineStart_;
    if (!blank) processLine(lineStart_, lineEnd);
    scanned_ = lineStart_ = next;
    if (blank) {
      finishEvent(next);
      if (status_ != ParseStatus::kOk) return;
    }
  }
}

// Views are rebuilt from offsets after every parse(): the buffer may have
// moved since earlier events of this batch were found, and joined_ may have
// grown.
void Parser::rebuildViews() {
  const char* base = buffer_.data();
  for (std::size_t i = 0; i < events_.size(); ++i) {
    const EventSpans& s = spans_[i];
    Event& e = events_[i];
    const char* start = base + e.offset;
    e.raw = {start, s.rawLength};
    e.data = {(s.dataJoined ? joined_.data() : start) + s.dataOffset, s.dataLength};
    e.type = {start + s.typeOffset, s.typeLength};
    e.id = {start + s.idOffset, s.idLength};
  }
}

void Parser::processLine(std::size_t lineStart, std::size_t lineEnd) {
  const char* base = buffer_.data();
  const std::string_view line(base + lineStart, lineEnd - lineStart);
  pending_.hasLines = true;
  if (line.front() == ':') {
    pending_.hasComment = true;
    return;
  }
  // Nearly every line of a model's stream is "data: ...": no search for its
  // colon, no comparing of field names.
  if (line.size() >= 5 && std::memcmp(line.data(), "data:", 5) == 0) {
    const std::size_t skip = line.size() > 5 && line[5] == ' ' ? 6 : 5;
    if (++pending_.dataLines == 1) {
      pending_.firstDataOffset = lineStart + skip - complete_;
      pending_.firstDataLength = line.size() - skip;
    }
    return;
  }
  std::string_view field;
  std::string_view value;
  splitField(line, field, value);
  const std::size_t valueOffset = static_cast<std::size_t>(value.data() - base) - complete_;
  if (field == "data") {  // "data" alone, no colon
    if (++pending_.dataLines == 1) {
      pending_.firstDataOffset = valueOffset;
      pending_.firstDataLength = value.size();
    }
  } else if (field == "event") {
    pending_.typeOffset = valueOffset;
    pending_.typeLength = value.size();
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) {  // WHATWG: ignore an id with NUL
      pending_.hasId = true;
      pending_.idOffset = valueOffset;
      pending_.idLength = value.size();
    }
  } else if (field == "retry") {
    if (auto ms = parseRetry(value)) pending_.retry = ms;
  }
}

void Parser::finishEvent(std::size_t end) {
  const std::size_t start = complete_;
  if (!pending_.hasLines) {  // a blank line between events: bytes of no event
    complete_ = end;
    return;
  }
  // The LF of a final CRLF is not counted: it may come with the next read,
  // after the CR has ended the event, and whether an event is refused must
  // not depend on where reads split the stream.
  std::size_t size = end - start;
  if (size >= 2 && buffer_[end - 2] == '\r' && buffer_[end - 1] == '\n') --size;
  if (size > limits_.maxEventBytes) {
    status_ = ParseStatus::kEventTooLarge;
    return;
  }
  // Made in place: the views are set by rebuildViews().
  Event& event = events_.emplace_back();
  event.offset = start;
  event.dataLines = pending_.dataLines;
  event.hasId = pending_.hasId;
  event.retry = pending_.retry;
  event.hasComment = pending_.hasComment;
  EventSpans& spans = spans_.emplace_back();
  spans.rawLength = end - start;
  spans.typeOffset = pending_.typeOffset;
  spans.typeLength = pending_.typeLength;
  spans.idOffset = pending_.idOffset;
  spans.idLength = pending_.idLength;
  if (pending_.dataLines == 1) {
    spans.dataOffset = pending_.firstDataOffset;
    spans.dataLength = pending_.firstDataLength;
  } else if (pending_.dataLines > 1) {
    joinData(spans, start, end);
  }
  if (pending_.hasId) lastEventId_.assign(buffer_.data() + start + spans.idOffset, spans.idLength);
  pending_ = Pending{};
  complete_ = end;
}

// The rare multi-line event: walk its lines again and join the data values.
void Parser::joinData(EventSpans& spans, std::size_t start, std::size_t end) {
  const char* base = buffer_.data();
  spans.dataJoined = true;
  spans.dataOffset = joined_.size();
  std::size_t at = start;
  while (at < end) {
    const std::size_t lineEnd = findLineEnd(base, at, end);
    std::string_view field;
    std::string_view value;
    if (lineEnd != at) {
      splitField({base + at, lineEnd - at}, field, value);
      if (field == "data") joined_.append(value).push_back('\n');
    }
    at = lineEnd + 1;
    if (lineEnd < end && base[lineEnd] == '\r' && at < end && base[at] == '\n') ++at;
  }
  joined_.pop_back();  // the LF after the last data line
  spans.dataLength = joined_.size() - spans.dataOffset;
}

}  // namespace relay::sse
