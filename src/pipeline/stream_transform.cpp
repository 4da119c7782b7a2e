#include "relay/pipeline/stream_transform.hpp"

#include "relay/sse/writer.hpp"

namespace relay::pipeline {

// One pass over a read's events, in stream order: what becomes of an event
// depends only on the events before it, never on those after it in the same
// read, so where the upstream's reads fall changes nothing the caller sees.
// While every event is kept, the parser's bytes go out as they are.
std::string_view StreamTransform::push(std::string_view bytes) {
  if (failed_) return {};
  parser_.consume();  // the previous push's bytes have been written
  parser_.feed(bytes);
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
  out_.clear();
  bool rewriting = false;  // out_ holds what goes out, instead of `all`
  std::size_t copied = 0;  // with rewriting: all[0, copied) is dealt with
  std::size_t end = all.size();
  for (const sse::Event& e : parser_.events()) {
    if (sawDone_) {  // after [DONE] in this read: cut here
      readLateUsage(e);
      continue;
    }
    const Edit edit = inspect(e);
    if (sawDone_) end = e.offset + e.raw.size();
    if (edit == Edit::kKeep && !rewriting) continue;
    rewriting = true;
    out_.append(all.substr(copied, e.offset - copied));  // bytes between events
    copied = e.offset + e.raw.size();
    switch (edit) {
      case Edit::kKeep:
        out_.append(e.raw);
        break;
      case Edit::kDrop:
        break;
      case Edit::kReplace:
        sse::appendData(out_, replacement_);
        break;
      case Edit::kUsageChunkFirst:
        sse::appendData(out_, replacement_);
        out_.append(e.raw);
        break;
    }
  }
  if (!rewriting) return all.substr(0, end);
  out_.append(all.substr(copied, end - copied));
  return out_;
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
