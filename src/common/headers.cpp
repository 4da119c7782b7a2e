#include "relay/common/headers.hpp"

#include <algorithm>

namespace relay {

namespace {
char lowerAscii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }
}  // namespace

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lowerAscii(a[i]) != lowerAscii(b[i])) return false;
  }
  return true;
}

std::string toLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lowerAscii(c);
  return out;
}

void Headers::add(std::string_view name, std::string_view value) {
  fields_.push_back({toLower(name), std::string(value)});
}

void Headers::set(std::string_view name, std::string_view value) {
  std::string lower = toLower(name);
  remove(lower);
  fields_.push_back({std::move(lower), std::string(value)});
}

void Headers::remove(std::string_view name) {
  std::string lower = toLower(name);
  std::erase_if(fields_, [&](const HeaderField& f) { return f.name == lower; });
}

const std::string* Headers::find(std::string_view lowerName) const {
  for (const HeaderField& f : fields_) {
    if (f.name == lowerName) return &f.value;
  }
  return nullptr;
}

}  // namespace relay
