// Editing JSON text by splicing byte ranges: the forwarded body is the client's
// body with a few ranges replaced, inserted or erased, and every other byte
// copied unchanged — unknown fields, key order, whitespace and number spelling
// all pass through, and the cost is one copy of the text.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "relay/common/json_scan.hpp"

namespace relay {

// Collects edits against `source`, then writes the edited text in one pass.
//
// Invariants: edits never overlap (an edit that would is refused), inserts at
// one offset come out in the order they were added and before a replacement
// starting there. Both the source and every edit's bytes are views: they must
// stay valid until appendTo()/build() has run. No allocation: the edit list is
// a fixed array, which is ample for the handful of edits a rewrite makes.
class JsonSplice {
 public:
  static constexpr std::size_t kMaxEdits = 16;

  explicit JsonSplice(std::string_view source) : source_(source) {}

  // Each returns false (recording nothing) when the range lies outside the
  // source, overlaps an earlier edit, or the edit list is full.
  [[nodiscard]] bool replace(JsonSpan span, std::string_view bytes);
  [[nodiscard]] bool insert(std::size_t offset, std::string_view bytes) {
    return replace({offset, 0}, bytes);
  }
  [[nodiscard]] bool erase(JsonSpan span) { return replace(span, {}); }

  std::size_t editCount() const { return count_; }
  // Size of the edited text.
  std::size_t resultSize() const;
  // Appends the edited text to `out` (reserving once).
  void appendTo(std::string& out) const;
  std::string build() const;

 private:
  struct Edit {
    std::size_t offset = 0;
    std::size_t length = 0;
    std::string_view bytes;
  };

  std::string_view source_;
  std::array<Edit, kMaxEdits> edits_{};  // sorted by (offset, inserts first), stable
  std::size_t count_ = 0;
};

// Adds `memberText` (e.g. `"include_usage":true`, already valid JSON) as the
// last member of the object at `object`, whose members are `members` (from
// scanObject). It goes right after the last member's value — or right after
// the '{' of an empty object — with a comma when needed. `memberText` is a view
// the splice keeps.
[[nodiscard]] bool addMember(JsonSplice& splice, JsonSpan object,
                             const std::vector<JsonMember>& members, std::string_view memberText);

// Erases members[index] together with exactly one separating comma (the one
// after it, or before it when it is the last member), so the text stays valid.
[[nodiscard]] bool removeMember(JsonSplice& splice, const std::vector<JsonMember>& members,
                                std::size_t index);

}  // namespace relay
