#include "relay/common/headers.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "relay/common/small_copy.hpp"

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
void copyLowerAt(char* to, const char* from) {
  Word x;
  std::memcpy(&x, from, sizeof x);
  x = lowerWord(x);
  std::memcpy(to, &x, sizeof x);
}

// Copies [from, from + n) to `to` (which does not overlap it) with its ASCII
// letters lowercased, a word at a time: names are copied into every head, so
// this runs for every field of every request, and one pass does both the
// copy (no call to memcpy) and the lowering. A tail shorter than a word is
// done as one more word ending at the last byte (it writes some bytes twice,
// the same both times), so no byte loop remains but for names under four
// bytes.
void copyLower(char* to, const char* from, std::size_t n) {
  if (n >= 8) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
      copyLowerAt<std::uint64_t>(to + i, from + i);
    if (i < n) copyLowerAt<std::uint64_t>(to + n - 8, from + n - 8);
  } else if (n >= 4) {
    copyLowerAt<std::uint32_t>(to, from);
    copyLowerAt<std::uint32_t>(to + n - 4, from + n - 4);
  } else {
    for (std::size_t i = 0; i < n; ++i)
      to[i] = lowerAscii(from[i]);
  }
}
}  // namespace

Headers::Headers(const Headers& other) {
  if (other.count_ == 0) return;
  regrow(other.count_, other.textSize_);  // just what is in use
  // Removed fields' bytes are copied too: offsets stay as they were.
  std::memcpy(entries(), other.entries(), std::size_t{other.count_} * sizeof(Entry));
  if (other.textSize_ != 0) std::memcpy(text(), other.text(), other.textSize_);
  count_ = other.count_;
  textSize_ = other.textSize_;
}

Headers& Headers::operator=(const Headers& other) {
  if (this != &other) *this = Headers(other);
  return *this;
}

void Headers::regrow(std::size_t fields, std::size_t bytes) {
  constexpr std::size_t kMax = std::numeric_limits<std::uint32_t>::max();
  if (fields > kMax / sizeof(Entry) || bytes > kMax) throw std::length_error("header fields");
  static_assert(alignof(Entry) <= alignof(std::max_align_t));
  auto larger = std::make_unique_for_overwrite<char[]>(fields * sizeof(Entry) + bytes);
  if (count_ != 0) std::memcpy(larger.get(), block_.get(), std::size_t{count_} * sizeof(Entry));
  if (textSize_ != 0) std::memcpy(larger.get() + fields * sizeof(Entry), text(), textSize_);
  block_ = std::move(larger);
  entryCapacity_ = static_cast<std::uint32_t>(fields);
  textCapacity_ = static_cast<std::uint32_t>(bytes);
}

void Headers::add(std::string_view name, std::string_view value) {
  const std::size_t need = name.size() + value.size();
  if (count_ == entryCapacity_ || textCapacity_ - textSize_ < need) {
    const char* old = block_ ? text() : nullptr;
    const bool aliased =
        old != nullptr && ((name.data() >= old && name.data() < old + textSize_) ||
                           (value.data() >= old && value.data() < old + textSize_));
    if (aliased) {  // the views would dangle when the block moves
      const std::string copy = std::string(name).append(value);
      add(std::string_view(copy).substr(0, name.size()),
          std::string_view(copy).substr(name.size()));
      return;
    }
    // A head has a dozen fields or so: room for them at once, then doubling.
    const std::size_t fields = count_ < entryCapacity_
                                   ? entryCapacity_
                                   : std::max<std::size_t>(12, std::size_t{entryCapacity_} * 2);
    std::size_t bytes = textCapacity_;
    if (bytes - textSize_ < need) {
      bytes =
          std::max<std::size_t>(std::size_t{textSize_} + need,
                                textCapacity_ == 0 ? kFirstText : std::size_t{textCapacity_} * 2);
    }
    regrow(fields, bytes);
  }
  char* at = text() + textSize_;
  copyLower(at, name.data(), name.size());
  copySmall(at + name.size(), value.data(), value.size());
  entries()[count_++] = Entry{textSize_, static_cast<std::uint32_t>(name.size()),
                              static_cast<std::uint32_t>(value.size())};
  textSize_ += static_cast<std::uint32_t>(need);
}

void Headers::set(std::string_view name, std::string_view value) {
  remove(name);  // (its bytes stay in the block: a value that is a view of it stays valid)
  add(name, value);
}

void Headers::remove(std::string_view name) {
  removeIf([&](const HeaderField& f) { return equalsIgnoreCase(f.name, name); });
}

namespace {
// a[0, n) == b[0, n). A name of 8 to 16 bytes (most field names) is two
// word compares, the second ending at the last byte, inline; others go to
// memcmp.
bool sameName(const char* a, const char* b, std::size_t n) {
  if (n >= 8 && n <= 16) {
    std::uint64_t a0, b0, a1, b1;
    std::memcpy(&a0, a, 8);
    std::memcpy(&b0, b, 8);
    std::memcpy(&a1, a + n - 8, 8);
    std::memcpy(&b1, b + n - 8, 8);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }
  return std::memcmp(a, b, n) == 0;
}
}  // namespace

std::optional<std::string_view> Headers::find(std::string_view lowerName) const {
  const char* const bytes = text();
  for (const Entry *e = entries(), *last = e + count_; e != last; ++e) {
    if (e->nameLength == lowerName.size() &&
        sameName(bytes + e->at, lowerName.data(), lowerName.size())) {
      return std::string_view(bytes + e->at + e->nameLength, e->valueLength);
    }
  }
  return std::nullopt;
}

}  // namespace relay
