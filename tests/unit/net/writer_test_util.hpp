// What the HTTP/1.1 writer's tests share (h1_writer_test.cpp,
// h1_writer_tls_test.cpp): the bytes they write and the loop that runs a
// write while the other end reads.
#pragma once

#include <charconv>
#include <chrono>
#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <gtest/gtest.h>

#include "session_common.hpp"

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

// Runs `task` on `io` while `reader` reads until `got` holds `expected`
// bytes (what arrived before included); both must end within 10 s. The
// task's answer, or nullopt if it threw or did not end.
template <class Reader>
std::optional<bool> runReading(asio::io_context& io, Reader& reader, std::string& got,
                               Task<bool> task, std::size_t expected) {
  std::optional<bool> result;
  asio::co_spawn(io, std::move(task), [&](std::exception_ptr e, bool ok) {
    if (!e) result = ok;
  });
  bool read = false;
  asio::async_read(reader, asio::dynamic_buffer(got), asio::transfer_exactly(expected - got.size()),
                   [&](boost::system::error_code ec, std::size_t) { read = !ec; });
  io.restart();
  io.run_for(std::chrono::seconds(10));
  EXPECT_TRUE(read) << "the reader did not get " << expected << " bytes (got " << got.size() << ")";
  return result;
}

}  // namespace relay::net::writer_test
