#include "relay/pipeline/stream_transform.hpp"

#include <cstring>

#include "relay/sse/writer.hpp"

namespace relay::pipeline {

// One pass over a read's events, in stream order: what becomes of an event
// depends only on the events before it, never on those after it in the same
// read, so where the upstream's reads fall changes nothing the caller sees.
// While every event is kept, the parser's bytes go out as they are; an
// event dropped or shortened (the usage chunk the gateway asked for,
// Moonshot's usage taken out of its chunk) is edited in the parser's buffer,
// so that a read that brings the whole stream is not copied for its last
// events.
std::string_view StreamTransform::push(std::string_view bytes) {
  if (failed_) return {};  // nothing more is parsed: nothing more is held
  parser_.consume();       // the previous push's bytes have been written
  parser_.feed(bytes);
  return pushInbox();
}

std::string_view StreamTransform::pushInbox() {
  const std::string_view out = relay();
  // The events were this read's to inspect; its bytes stay until the next
  // push() or inbox() (the caller is writing them).
  parser_.dropEvents();
  return out;
}

std::string_view StreamTransform::relay() {
  if (failed_) return {};
  if (parser_.parse() != sse::ParseStatus::kOk) {
    failed_ = true;
    return {};
  }
  const std::string_view all = parser_.completeBytes();
  if (sawDone_) {  // the caller's stream is over
    for (const sse::Event& e : parser_.events())
      readLateUsage(e);
    return {};
  }
  editText_.clear();
  moreEdits_.clear();
  std::size_t edits = 0;
  bool grows = false;
  std::size_t end = all.size();
  for (const sse::Event& e : parser_.events()) {
    if (sawDone_) {  // after [DONE] in this read: cut here
      readLateUsage(e);
      continue;
    }
    const Edit edit = inspect(e);
    if (sawDone_) end = e.offset + e.raw.size();
    if (edit == Edit::kKeep) continue;
    const std::size_t at = editText_.size();
    if (edit != Edit::kDrop) sse::appendData(editText_, replacement_);
    const std::size_t textLength = editText_.size() - at;
    const bool keepEvent = edit == Edit::kUsageChunkFirst;
    if (keepEvent || textLength > e.raw.size()) grows = true;
    const EventEdit record{e.offset, e.raw.size(), at, textLength, keepEvent};
    if (edits < kInPlaceEdits)
      edits_[edits] = record;
    else
      moreEdits_.push_back(record);
    ++edits;
  }
  if (edits == 0) return all.substr(0, end);
  return applyEdits(edits, grows, end);
}

std::string_view StreamTransform::applyEdits(std::size_t edits, bool grows, std::size_t end) {
  auto editAt = [&](std::size_t i) -> const EventEdit& {
    return i < kInPlaceEdits ? edits_[i] : moreEdits_[i - kInPlaceEdits];
  };
  if (grows) {
    // Rare (a usage chunk put before [DONE]): the read is rebuilt in out_.
    const std::string_view all = parser_.completeBytes();
    out_.clear();
    std::size_t copied = 0;  // all[0, copied) is dealt with
    for (std::size_t i = 0; i < edits; ++i) {
      const EventEdit& edit = editAt(i);
      out_.append(all.substr(copied, edit.offset - copied));  // bytes between events
      out_.append(editText_, edit.at, edit.textLength);
      if (edit.keepEvent) out_.append(all.substr(edit.offset, edit.length));
      copied = edit.offset + edit.length;
    }
    out_.append(all.substr(copied, end - copied));
    return out_;
  }
  char* base = parser_.completeBytesForEdit().data();
  std::size_t write = 0;  // the edited bytes are [0, write)
  std::size_t read = 0;   // the read's bytes before `read` are dealt with
  for (std::size_t i = 0; i < edits; ++i) {
    const EventEdit& edit = editAt(i);
    const std::size_t kept = edit.offset - read;
    if (write != read && kept != 0) std::memmove(base + write, base + read, kept);
    write += kept;
    // Within the event's own bytes (write <= edit.offset, and no edit here
    // is longer than its event): nothing not yet read is overwritten.
    if (edit.textLength != 0)
      std::memcpy(base + write, editText_.data() + edit.at, edit.textLength);
    write += edit.textLength;
    read = edit.offset + edit.length;
  }
  const std::size_t rest = end - read;
  if (write != read && rest != 0) std::memmove(base + write, base + read, rest);
  return {base, write + rest};
}

StreamTransform::Edit StreamTransform::inspect(const sse::Event& e) {
  if (!e.dispatches()) return Edit::kKeep;
  ++events_;
  if (e.data == "[DONE]") {
    sawDone_ = true;
    // A Moonshot stream's usage arrives in a choice; a caller who asked for
    // usage gets it in OpenAI's place, as its own chunk before [DONE], built
    // from the usage seen so far.
    if (!callerWantsUsage_ || !usageInChoice_ || !usage_ || !haveIdentity_) return Edit::kKeep;
    replacement_.clear();
    sse::appendUsageChunk(replacement_, identity_, *usage_);
    return Edit::kUsageChunkFirst;
  }
  // The identity (id, model, created) is only for the usage chunk a caller
  // who asked for usage may be owed: nobody else pays for reading it.
  if (callerWantsUsage_ && !haveIdentity_)
    haveIdentity_ = sse::readChunkIdentity(e.data, identity_);
  if (!sse::mayContainUsage(e.data)) return Edit::kKeep;
  std::optional<sse::FoundUsage> found = sse::extractUsage(e.data);
  if (!found) return Edit::kKeep;
  usage_ = found->usage;
  // The latest usage decides whether a chunk is owed before [DONE]: none
  // when the caller has just received it in OpenAI's place.
  usageInChoice_ = found->place == sse::UsagePlace::kFirstChoice;
  if (found->usageOnlyChunk) return callerWantsUsage_ ? Edit::kKeep : Edit::kDrop;
  // choices[0].usage always goes (see the header); a top-level usage object
  // beside choices goes too unless the caller asked for usage.
  replacement_.clear();
  const bool stripTopLevel = !callerWantsUsage_ && found->place == sse::UsagePlace::kTopLevel;
  return sse::removeUsage(e.data, stripTopLevel, replacement_) ? Edit::kReplace : Edit::kKeep;
}

// Usage an upstream sends after [DONE] reaches no caller, but it is the
// upstream's account of what it charged: it is still recorded.
void StreamTransform::readLateUsage(const sse::Event& e) {
  if (!e.dispatches() || !sse::mayContainUsage(e.data)) return;
  if (std::optional<sse::FoundUsage> found = sse::extractUsage(e.data)) usage_ = found->usage;
}

}  // namespace relay::pipeline
