// Bytes for the HTTP/1.1 writer's tests (h1_writer_test.cpp,
// h1_writer_tls_test.cpp).
#pragma once

#include <charconv>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace relay::net::writer_test {

// How long one write may wait for room in these tests.
inline constexpr std::chrono::milliseconds kStall{250};

// `n` bytes that are not periodic over a socket buffer's size, so that a
// piece written twice or skipped shows in the comparison.
inline std::string bigBytes(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>('a' + (i * 7 + i / 4096) % 26);
  return s;
}

// `bytes` framed as one chunk of a chunked body.
inline std::string chunkOf(std::string_view bytes) {
  char size[24];
  const auto end = std::to_chars(size, size + sizeof size, bytes.size(), 16).ptr;
  return std::string(size, end) + "\r\n" + std::string(bytes) + "\r\n";
}

}  // namespace relay::net::writer_test
