#include "relay/common/json_splice.hpp"

namespace relay {

namespace {

// Sort key: by offset, and at one offset pure inserts before a replacement, so
// that an insert at a replaced range's start lands before the new bytes.
bool goesBefore(std::size_t offsetA, std::size_t lengthA, std::size_t offsetB,
                std::size_t lengthB) {
  if (offsetA != offsetB) return offsetA < offsetB;
  return lengthA == 0 && lengthB != 0;
}

}  // namespace

bool JsonSplice::replace(JsonSpan span, std::string_view bytes) {
  if (count_ == kMaxEdits) return false;
  if (span.offset > source_.size() || span.length > source_.size() - span.offset) return false;
  for (std::size_t i = 0; i < count_; ++i) {
    const Edit& e = edits_[i];
    // Half-open ranges intersect; for an insert (length 0) this means "strictly
    // inside a replaced range", the only place an insert would be ambiguous.
    if (span.offset < e.offset + e.length && e.offset < span.end()) return false;
  }
  std::size_t at = count_;
  while (at > 0 &&
         goesBefore(span.offset, span.length, edits_[at - 1].offset, edits_[at - 1].length)) {
    edits_[at] = edits_[at - 1];
    --at;
  }
  edits_[at] = Edit{span.offset, span.length, bytes};
  ++count_;
  return true;
}

std::size_t JsonSplice::resultSize() const {
  std::size_t size = source_.size();
  for (std::size_t i = 0; i < count_; ++i)
    size = size - edits_[i].length + edits_[i].bytes.size();
  return size;
}

void JsonSplice::appendTo(std::string& out) const {
  out.reserve(out.size() + resultSize());
  std::size_t cursor = 0;
  for (std::size_t i = 0; i < count_; ++i) {
    const Edit& e = edits_[i];
    out.append(source_.substr(cursor, e.offset - cursor));
    out.append(e.bytes);
    cursor = e.offset + e.length;
  }
  out.append(source_.substr(cursor));
}

std::string JsonSplice::build() const {
  std::string out;
  appendTo(out);
  return out;
}

bool addMember(JsonSplice& splice, JsonSpan object, const std::vector<JsonMember>& members,
               std::string_view memberText) {
  if (members.empty()) return splice.insert(object.offset + 1, memberText);
  if (splice.editCount() + 2 > JsonSplice::kMaxEdits) return false;  // all or nothing
  const std::size_t after = members.back().value.span.end();
  // Two inserts at one offset keep their order, so no buffer is needed to
  // join the comma and the member.
  return splice.insert(after, ",") && splice.insert(after, memberText);
}

bool removeMember(JsonSplice& splice, const std::vector<JsonMember>& members, std::size_t index) {
  if (index >= members.size()) return false;
  const JsonMember& member = members[index];
  if (members.size() == 1) return splice.erase(member.span());
  if (index + 1 < members.size()) {
    // The member, its comma and the whitespace up to the next key.
    const std::size_t next = members[index + 1].keyOffset;
    return splice.erase({member.keyOffset, next - member.keyOffset});
  }
  // The last member: from the end of the previous value, comma included.
  const std::size_t from = members[index - 1].value.span.end();
  return splice.erase({from, member.value.span.end() - from});
}

}  // namespace relay
