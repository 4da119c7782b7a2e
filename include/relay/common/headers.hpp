// HTTP header fields as the pipeline sees them, whatever the HTTP version.
//
// Names are stored lowercase (HTTP/2 requires it and HTTP/1.1 names are
// case-insensitive), so lookups compare bytes. A handful of fields per message
// makes a flat vector faster than any map.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace relay {

struct HeaderField {
  std::string name;  // lowercase
  std::string value;
};

class Headers {
 public:
  using const_iterator = std::vector<HeaderField>::const_iterator;

  // `name` is lowercased on the way in.
  void add(std::string_view name, std::string_view value);
  // Replaces every field called `name` with one.
  void set(std::string_view name, std::string_view value);
  void remove(std::string_view name);
  // Removes every field for which `pred(field)` is true.
  template <class Pred>
  void removeIf(Pred pred) {
    std::erase_if(fields_, pred);
  }
  // First value of `name` (lowercase), or nullptr.
  const std::string* find(std::string_view lowerName) const;
  bool contains(std::string_view lowerName) const { return find(lowerName) != nullptr; }
  std::string_view get(std::string_view lowerName) const {
    const std::string* v = find(lowerName);
    return v ? std::string_view(*v) : std::string_view();
  }

  const_iterator begin() const { return fields_.begin(); }
  const_iterator end() const { return fields_.end(); }
  std::size_t size() const { return fields_.size(); }
  bool empty() const { return fields_.empty(); }
  void reserve(std::size_t n) { fields_.reserve(n); }

 private:
  std::vector<HeaderField> fields_;
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
