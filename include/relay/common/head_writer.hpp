// Writes an HTTP/1.1 head ("name: value\r\n" lines and raw pieces) into a
// std::string through a cursor.
//
// Why: growing the string once per field (resize, then copy) zero-fills each
// field's room and goes through the string's out-of-line growth path, about
// fifty instructions per field. Here the string is sized once, to a bound the
// caller gives, the pieces are copied in, and finish() cuts it to what was
// written. A bound that was too small is not an error: the writer grows the
// string (doubling) before any piece that would not fit, so no write can run
// past it. A piece must not be a view into the string being written (growing
// would move it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

#include "relay/common/small_copy.hpp"

namespace relay {

class HeadWriter {
 public:
  // Writes after what `out` holds; `bound` is the room expected to be needed.
  HeadWriter(std::string& out, std::size_t bound) : out_(&out), used_(out.size()) {
    out.resize(used_ + bound);
  }
  ~HeadWriter() { finish(); }
  HeadWriter(const HeadWriter&) = delete;
  HeadWriter& operator=(const HeadWriter&) = delete;

  // (Inlined: a constant piece then becomes a move or two.)
  [[gnu::always_inline]] HeadWriter& raw(std::string_view s) {
    room(s.size());
    put(s);
    return *this;
  }
  [[gnu::always_inline]] HeadWriter& field(std::string_view name, std::string_view value) {
    room(name.size() + value.size() + 4);
    put(name);
    put(": ");
    put(value);
    put("\r\n");
    return *this;
  }
  // Cuts the string to what was written (once; the destructor calls it too).
  void finish() {
    if (out_ == nullptr) return;
    out_->resize(used_);
    out_ = nullptr;
  }
  std::size_t written() const { return used_; }

 private:
  [[gnu::always_inline]] void room(std::size_t n) {
    if (out_->size() - used_ < n) grow(n);
  }
  // (Out of line: the common path stays small enough to be inlined.)
  [[gnu::noinline]] void grow(std::size_t n) {
    out_->resize(std::max(out_->size() * 2, used_ + n));
  }
  [[gnu::always_inline]] void put(std::string_view s) {
    copySmall(out_->data() + used_, s.data(), s.size());  // (nothing read when empty)
    used_ += s.size();
  }

  std::string* out_;
  std::size_t used_;
};

}  // namespace relay
