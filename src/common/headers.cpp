#include "relay/common/headers.hpp"

#include <algorithm>

namespace relay {

namespace {
char lowerAscii(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}
}  // namespace

std::string_view trimWhitespace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lowerAscii(a[i]) != lowerAscii(b[i])) return false;
  }
  return true;
}

std::string toLower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = lowerAscii(c);
  return out;
}

namespace {
bool isLower(std::string_view s) {
  for (char c : s) {
    if (c >= 'A' && c <= 'Z') return false;
  }
  return true;
}
}  // namespace

void Headers::add(std::string_view name, std::string_view value) {
  // A head has a dozen fields or so: one allocation for them, not five
  // (growing 1, 2, 4, 8, 16 moves every field each time).
  if (fields_.capacity() == 0) fields_.reserve(12);
  // Most names arrive lowercase already (HTTP/2 requires it; our own code
  // writes them so): copy them as they are.
  HeaderField& f = fields_.emplace_back(HeaderField{std::string(name), std::string(value)});
  if (!isLower(name)) {
    for (char& c : f.name)
      c = lowerAscii(c);
  }
}

void Headers::set(std::string_view name, std::string_view value) {
  remove(name);
  add(name, value);
}

void Headers::remove(std::string_view name) {
  std::erase_if(fields_, [&](const HeaderField& f) { return equalsIgnoreCase(f.name, name); });
}

const std::string* Headers::find(std::string_view lowerName) const {
  for (const HeaderField& f : fields_) {
    if (f.name == lowerName) return &f.value;
  }
  return nullptr;
}

}  // namespace relay
