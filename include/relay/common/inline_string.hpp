// A string of at most N bytes held inside the object: for the ids every
// request carries (a trace id is 32 bytes, a traceparent 55), which a
// std::string would put on the heap, being longer than its 15 inline bytes.
// Reads as a std::string_view; compares with anything that converts to one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <stdexcept>
#include <string_view>

namespace relay {

template <std::size_t N>
class InlineString {
  static_assert(N > 0 && N <= 255, "the size is kept in one byte");

 public:
  InlineString() = default;
  InlineString(std::string_view s) { assign(s); }  // NOLINT(google-explicit-constructor)
  InlineString& operator=(std::string_view s) {
    assign(s);
    return *this;
  }

  // Longer than N is a bug in the caller: every id is checked for its
  // length before it gets here.
  void assign(std::string_view s) {
    if (s.size() > N) throw std::length_error("InlineString: longer than its capacity");
    if (!s.empty()) std::memmove(bytes_, s.data(), s.size());
    size_ = static_cast<std::uint8_t>(s.size());
  }
  // `n` bytes (at most N) to be written through data().
  char* resize(std::size_t n) {
    if (n > N) throw std::length_error("InlineString: longer than its capacity");
    size_ = static_cast<std::uint8_t>(n);
    return bytes_;
  }

  // A view of the bytes inside this object: it dies with the object (and a
  // move does not carry it along, unlike a long std::string's). Keep the
  // object, not the view, of a temporary: `std::string_view v =
  // trace.traceparent();` dangles.
  // NOLINTNEXTLINE(google-explicit-constructor)
  operator std::string_view() const { return {bytes_, size_}; }
  std::string_view view() const { return {bytes_, size_}; }
  const char* data() const { return bytes_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  static constexpr std::size_t capacity() { return N; }

  friend bool operator==(const InlineString& a, const InlineString& b) {
    return a.view() == b.view();
  }
  friend bool operator==(const InlineString& a, std::string_view b) { return a.view() == b; }
  friend std::ostream& operator<<(std::ostream& out, const InlineString& s) {
    return out << s.view();
  }

 private:
  char bytes_[N] = {};  // (zeroed: a copy reads them all)
  std::uint8_t size_ = 0;
};

}  // namespace relay
