#include "relay/common/headers.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>

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
// The ASCII capitals of a word of bytes, lowercased, all bytes at once. Per
// byte b < 0x80: b + (0x80 - 'A') has its high bit set iff b >= 'A', and
// b + (0x80 - 'Z' - 1) iff b > 'Z'; no sum carries into the next byte.
template <class Word>
Word lowerWord(Word x) {
  constexpr Word kOnes = static_cast<Word>(~Word{0}) / 0xFF;  // 0x0101...
  constexpr Word kHighs = kOnes * 0x80;
  const Word low7 = x & ~kHighs;
  const Word atLeastA = low7 + kOnes * (0x80 - 'A');
  const Word aboveZ = low7 + kOnes * (0x80 - 'Z' - 1);
  const Word upper = atLeastA & ~aboveZ & ~x & kHighs;
  return x | (upper >> 2);  // 0x80 >> 2 == 0x20, the case bit
}

template <class Word>
void lowerAt(char* p) {
  Word x;
  std::memcpy(&x, p, sizeof x);
  x = lowerWord(x);
  std::memcpy(p, &x, sizeof x);
}

// Lowercases the ASCII letters of [p, p + n) in place, a word at a time:
// names are copied into every head, so this runs for every field of every
// request. A tail shorter than a word is done as one more word ending at the
// last byte (lowercasing twice changes nothing), so no byte loop remains
// but for names under four bytes.
void lowerInPlace(char* p, std::size_t n) {
  if (n >= 8) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
      lowerAt<std::uint64_t>(p + i);
    if (i < n) lowerAt<std::uint64_t>(p + n - 8);
  } else if (n >= 4) {
    lowerAt<std::uint32_t>(p);
    lowerAt<std::uint32_t>(p + n - 4);
  } else {
    for (std::size_t i = 0; i < n; ++i)
      p[i] = lowerAscii(p[i]);
  }
}
}  // namespace

Headers::Text::Text(const Text& other) : size(other.size), capacity(other.size) {
  if (size == 0) return;
  bytes = std::make_unique_for_overwrite<char[]>(size);
  std::memcpy(bytes.get(), other.bytes.get(), size);
}

Headers::Text& Headers::Text::operator=(const Text& other) {
  if (this != &other) *this = Text(other);
  return *this;
}

void Headers::Text::grow(std::size_t atLeast) {
  if (atLeast > std::numeric_limits<std::uint32_t>::max()) throw std::length_error("header fields");
  auto larger = std::make_unique_for_overwrite<char[]>(atLeast);
  if (size != 0) std::memcpy(larger.get(), bytes.get(), size);
  bytes = std::move(larger);
  capacity = static_cast<std::uint32_t>(atLeast);
}

void Headers::add(std::string_view name, std::string_view value) {
  // A head has a dozen fields or so: room for them at once, not growth by
  // doubling (which moves every byte each time).
  if (entries_.capacity() == 0) entries_.reserve(12);
  const std::size_t need = name.size() + value.size();
  if (text_.capacity - text_.size < need) {
    const char* old = text_.data();
    const bool aliased =
        old != nullptr && ((name.data() >= old && name.data() < old + text_.size) ||
                           (value.data() >= old && value.data() < old + text_.size));
    if (aliased) {  // the views would dangle when the buffer moves
      const std::string copy = std::string(name).append(value);
      add(std::string_view(copy).substr(0, name.size()),
          std::string_view(copy).substr(name.size()));
      return;
    }
    text_.grow(std::max<std::size_t>(std::size_t{text_.size} + need,
                                     text_.capacity == 0 ? 512 : std::size_t{text_.capacity} * 2));
  }
  char* at = text_.bytes.get() + text_.size;
  if (!name.empty()) {
    std::memcpy(at, name.data(), name.size());
    lowerInPlace(at, name.size());
  }
  if (!value.empty()) std::memcpy(at + name.size(), value.data(), value.size());
  entries_.push_back(Entry{text_.size, static_cast<std::uint32_t>(name.size()),
                           static_cast<std::uint32_t>(value.size())});
  text_.size += static_cast<std::uint32_t>(need);
}

void Headers::set(std::string_view name, std::string_view value) {
  remove(name);  // (its bytes stay in text_: a value that is a view of it stays valid)
  add(name, value);
}

void Headers::remove(std::string_view name) {
  removeIf([&](const HeaderField& f) { return equalsIgnoreCase(f.name, name); });
}

std::optional<std::string_view> Headers::find(std::string_view lowerName) const {
  for (const Entry& e : entries_) {
    if (e.nameLength == lowerName.size() &&
        std::memcmp(text_.data() + e.at, lowerName.data(), lowerName.size()) == 0) {
      return std::string_view(text_.data() + e.at + e.nameLength, e.valueLength);
    }
  }
  return std::nullopt;
}

}  // namespace relay
