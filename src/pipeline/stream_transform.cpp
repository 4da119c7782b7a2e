#include "relay/pipeline/stream_transform.hpp"

#include "relay/sse/writer.hpp"

namespace relay::pipeline {

std::string_view StreamTransform::push(std::string_view bytes) {
  if (failed_) return {};
  parser_.consume();  // the previous push's bytes have been written
  parser_.feed(bytes);
  if (parser_.parse() != sse::ParseStatus::kOk) {
    failed_ = true;
    return {};
  }
  bool needRewrite = false;
  for (const sse::Event& e : parser_.events())
    needRewrite |= inspect(e);
  if (!needRewrite) return parser_.completeBytes();
  rewrite();
  return out_;
}

bool StreamTransform::inspect(const sse::Event& e) {
  if (!e.dispatches()) return false;
  ++events_;
  if (e.data == "[DONE]") {
    sawDone_ = true;
    // A Moonshot stream's usage arrives in a choice; a caller who asked for
    // usage gets it in OpenAI's place, as its own chunk before [DONE].
    return callerWantsUsage_ && usageInChoice_ && haveIdentity_;
  }
  if (!haveIdentity_) haveIdentity_ = sse::readChunkIdentity(e.data, identity_);
  if (!sse::mayContainUsage(e.data)) return false;
  std::optional<sse::FoundUsage> found = sse::extractUsage(e.data);
  if (!found) return false;
  usage_ = found->usage;
  if (found->place == sse::UsagePlace::kFirstChoice) {
    usageInChoice_ = true;  // always moved out of the choice (see rewrite())
    return true;
  }
  return found->usageOnlyChunk && !callerWantsUsage_;
}

void StreamTransform::rewrite() {
  out_.clear();
  std::string_view all = parser_.completeBytes();
  std::size_t copied = 0;
  for (const sse::Event& e : parser_.events()) {
    out_.append(all.substr(copied, e.offset - copied));  // bytes between events
    copied = e.offset + e.raw.size();
    if (!e.dispatches()) {
      out_.append(e.raw);
      continue;
    }
    if (e.data == "[DONE]") {
      if (callerWantsUsage_ && usageInChoice_ && usage_ && haveIdentity_) {
        std::string chunk;
        sse::appendUsageChunk(chunk, identity_, *usage_);
        sse::appendData(out_, chunk);
      }
      out_.append(e.raw);
      continue;
    }
    if (sse::mayContainUsage(e.data)) {
      std::optional<sse::FoundUsage> found = sse::extractUsage(e.data);
      if (found && found->usageOnlyChunk && !callerWantsUsage_) continue;  // asked for by us
      std::string stripped;
      if (found && found->place == sse::UsagePlace::kFirstChoice &&
          sse::removeChoiceUsage(e.data, stripped)) {
        sse::appendData(out_, stripped);
        continue;
      }
    }
    out_.append(e.raw);
  }
  out_.append(all.substr(copied));
}

}  // namespace relay::pipeline
