// HTTP header fields as the pipeline sees them, whatever the HTTP version.
//
// Names are stored lowercase (HTTP/2 requires it and HTTP/1.1 names are
// case-insensitive), so lookups compare bytes. A handful of fields per message
// makes a flat list faster than any map.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace relay {

// One field as a view into its Headers: valid until that Headers changes.
struct HeaderField {
  std::string_view name;  // lowercase
  std::string_view value;
};

// The fields of one head in one block of memory: the index of fields (an
// offset and two lengths each) at its start, the names and values back to
// back after it — one allocation however many fields arrive, where a string
// per name and value cost an allocation for every one past 15 bytes, and a
// separate index one more per head.
class Headers {
  struct Entry {
    std::uint32_t at;  // name at text()[at], value right after it
    std::uint32_t nameLength;
    std::uint32_t valueLength;
  };

 public:
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = HeaderField;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = HeaderField;

    const_iterator() = default;
    HeaderField operator*() const { return owner_->field(*at_); }
    const_iterator& operator++() {
      ++at_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator before = *this;
      ++at_;
      return before;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) {
      return a.at_ == b.at_;
    }

   private:
    friend class Headers;
    const_iterator(const Headers* owner, const Entry* at) : owner_(owner), at_(at) {}
    const Headers* owner_ = nullptr;
    const Entry* at_ = nullptr;
  };

  Headers() = default;
  Headers(const Headers& other);
  Headers& operator=(const Headers& other);
  Headers(Headers&& other) noexcept
      : block_(std::move(other.block_)),
        count_(std::exchange(other.count_, 0)),
        entryCapacity_(std::exchange(other.entryCapacity_, 0)),
        textSize_(std::exchange(other.textSize_, 0)),
        textCapacity_(std::exchange(other.textCapacity_, 0)) {}
  Headers& operator=(Headers&& other) noexcept {
    block_ = std::move(other.block_);
    count_ = std::exchange(other.count_, 0);
    entryCapacity_ = std::exchange(other.entryCapacity_, 0);
    textSize_ = std::exchange(other.textSize_, 0);
    textCapacity_ = std::exchange(other.textCapacity_, 0);
    return *this;
  }

  // `name` is lowercased on the way in. `name` and `value` may be views into
  // this Headers itself. Index and text share one block: an add that
  // outgrows either moves both, and every view into this Headers (a
  // HeaderField, a find() result) then dangles.
  void add(std::string_view name, std::string_view value);
  // Replaces every field called `name` with one.
  void set(std::string_view name, std::string_view value);
  void remove(std::string_view name);
  // Removes every field for which `pred(field)` is true (their bytes stay in
  // the block: a view of a removed value stays valid until the block grows).
  template <class Pred>
  void removeIf(Pred pred) {
    Entry* const first = entries();
    Entry* const last = first + count_;
    Entry* kept = std::remove_if(first, last, [&](const Entry& e) { return pred(field(e)); });
    count_ = static_cast<std::uint32_t>(kept - first);
  }
  // First value of `name` (lowercase), or nullopt.
  std::optional<std::string_view> find(std::string_view lowerName) const;
  bool contains(std::string_view lowerName) const { return find(lowerName).has_value(); }
  std::string_view get(std::string_view lowerName) const {
    return find(lowerName).value_or(std::string_view());
  }

  const_iterator begin() const { return {this, entries()}; }
  const_iterator end() const { return {this, entries() + count_}; }
  std::size_t size() const { return count_; }
  // The bytes of every name and value held (a removed field's too): with
  // four a field for ": " and CRLF, a bound on what writing them out takes.
  std::size_t textBytes() const { return textSize_; }
  bool empty() const { return count_ == 0; }
  // Room for `fields` fields of `bytes` bytes in all (by default the text's
  // first size, so that the first add does not move the block again). When
  // it grows the block, views into this Headers dangle, as after add().
  static constexpr std::size_t kFirstText = 512;
  void reserve(std::size_t fields, std::size_t bytes = kFirstText) {
    if (fields > entryCapacity_ || bytes > textCapacity_) {
      regrow(std::max<std::size_t>(fields, entryCapacity_),
             std::max<std::size_t>(bytes, textCapacity_));
    }
  }

 private:
  // The block: entryCapacity_ entries, then textCapacity_ bytes of text.
  Entry* entries() const { return reinterpret_cast<Entry*>(block_.get()); }
  char* text() const { return block_.get() + std::size_t{entryCapacity_} * sizeof(Entry); }
  // A new block with room for `fields` entries and `bytes` of text, holding
  // what this one holds.
  void regrow(std::size_t fields, std::size_t bytes);

  HeaderField field(const Entry& e) const {
    const char* at = text() + e.at;
    return {std::string_view(at, e.nameLength), std::string_view(at + e.nameLength, e.valueLength)};
  }

  // (operator new[] of char: aligned for any fundamental type, so for Entry)
  std::unique_ptr<char[]> block_;
  std::uint32_t count_ = 0;
  std::uint32_t entryCapacity_ = 0;
  std::uint32_t textSize_ = 0;
  std::uint32_t textCapacity_ = 0;
};

// `s` without leading and trailing spaces and tabs (HTTP's optional whitespace).
std::string_view trimWhitespace(std::string_view s);

// True when `a` and `b` are equal ignoring ASCII case.
bool equalsIgnoreCase(std::string_view a, std::string_view b);
std::string toLower(std::string_view s);

}  // namespace relay
