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

// The fields of one head in one buffer: names and values back to back in
// `text_`, each field an offset and two lengths — one allocation for the
// bytes and one for the index however many fields arrive, where a string per
// name and value cost an allocation for every one past 15 bytes.
class Headers {
  struct Entry {
    std::uint32_t at;  // name at text_[at], value right after it
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
    const_iterator(const Headers* owner, std::vector<Entry>::const_iterator at)
        : owner_(owner), at_(at) {}
    const Headers* owner_ = nullptr;
    std::vector<Entry>::const_iterator at_;
  };

  // `name` is lowercased on the way in. `name` and `value` may be views into
  // this Headers itself.
  void add(std::string_view name, std::string_view value);
  // Replaces every field called `name` with one.
  void set(std::string_view name, std::string_view value);
  void remove(std::string_view name);
  // Removes every field for which `pred(field)` is true.
  template <class Pred>
  void removeIf(Pred pred) {
    std::erase_if(entries_, [&](const Entry& e) { return pred(field(e)); });
  }
  // First value of `name` (lowercase), or nullopt.
  std::optional<std::string_view> find(std::string_view lowerName) const;
  bool contains(std::string_view lowerName) const { return find(lowerName).has_value(); }
  std::string_view get(std::string_view lowerName) const {
    return find(lowerName).value_or(std::string_view());
  }

  const_iterator begin() const { return {this, entries_.begin()}; }
  const_iterator end() const { return {this, entries_.end()}; }
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  // Room for `fields` fields of `bytes` bytes in all.
  void reserve(std::size_t fields, std::size_t bytes = 0) {
    entries_.reserve(fields);
    if (bytes > text_.capacity) text_.grow(bytes);
  }

 private:
  // The bytes of every field: a size, a capacity and the bytes (a
  // std::string would check and terminate on every append). A copy holds
  // just the bytes in use.
  struct Text {
    std::unique_ptr<char[]> bytes;
    std::uint32_t size = 0;
    std::uint32_t capacity = 0;

    Text() = default;
    Text(const Text& other);
    Text& operator=(const Text& other);
    Text(Text&& other) noexcept
        : bytes(std::move(other.bytes)),
          size(std::exchange(other.size, 0)),
          capacity(std::exchange(other.capacity, 0)) {}
    Text& operator=(Text&& other) noexcept {
      bytes = std::move(other.bytes);
      size = std::exchange(other.size, 0);
      capacity = std::exchange(other.capacity, 0);
      return *this;
    }
    void grow(std::size_t atLeast);
    const char* data() const { return bytes.get(); }
  };

  HeaderField field(const Entry& e) const {
    const char* at = text_.data() + e.at;
    return {std::string_view(at, e.nameLength), std::string_view(at + e.nameLength, e.valueLength)};
  }

  Text text_;
  std::vector<Entry> entries_;
};

// `s` without leading and trailing spaces and tabs (HTTP's optional whitespace).
std::string_view trimWhitespace(std::string_view s);

// True when `a` and `b` are equal ignoring ASCII case.
bool equalsIgnoreCase(std::string_view a, std::string_view b);
std::string toLower(std::string_view s);

// Appends "name: value\r\n" to an HTTP/1.1 head: one growth, lengths known.
inline void appendField(std::string& out, std::string_view name, std::string_view value) {
  const std::size_t at = out.size();
  out.resize(at + name.size() + value.size() + 4);
  char* p = out.data() + at;
  p = std::copy(name.begin(), name.end(), p);
  *p++ = ':';
  *p++ = ' ';
  p = std::copy(value.begin(), value.end(), p);
  *p++ = '\r';
  *p = '\n';
}

}  // namespace relay
