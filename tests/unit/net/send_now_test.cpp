// The first write of an answer or a request (relay/net/send_now.hpp): what
// one non-blocking sendmsg takes goes whole and in order, a socket without
// room gives 0 and no error, a peer that left gives an error and no signal,
// and the buffer count stops at its ceiling.
#include "relay/net/send_now.hpp"

#include <array>
#include <cerrno>
#include <span>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

namespace relay::net {
namespace {

namespace asio = boost::asio;

// A connected pair of stream sockets; [0] is written, [1] read.
struct SocketPair {
  int fd[2] = {-1, -1};
  SocketPair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
  ~SocketPair() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  // Everything readable on [1] now.
  std::string drain() const {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd[1], buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }
};

TEST(SendNow, SendsTheBuffersInOrderAndSkipsEmptyOnes) {
  SocketPair p;
  const std::string head = "HTTP/1.1 200 OK\r\n\r\n", body = "{\"ok\":true}";
  const std::array<asio::const_buffer, 4> bufs{asio::buffer(head), asio::const_buffer(),
                                               asio::buffer(body), asio::const_buffer()};
  boost::system::error_code ec;
  EXPECT_EQ(sendNow(p.fd[0], bufs, ec), head.size() + body.size());
  EXPECT_FALSE(ec);
  EXPECT_EQ(p.drain(), head + body);
}

TEST(SendNow, NothingToSendIsZeroWithoutACall) {
  boost::system::error_code ec(EPIPE, boost::system::system_category());  // cleared on entry
  const std::array<asio::const_buffer, 2> none{};
  EXPECT_EQ(sendNow(-1, none, ec), 0u);  // an fd that would fail: never used
  EXPECT_FALSE(ec);
}

TEST(SendNow, ASocketWithoutRoomTakesNothingAndIsNoError) {
  SocketPair p;
  // Fill the socket until a send takes nothing (the reader never reads).
  const std::string block(64 * 1024, 'x');
  const std::array<asio::const_buffer, 1> bufs{asio::buffer(block)};
  boost::system::error_code ec;
  std::size_t total = 0;
  for (int i = 0; i < 10'000; ++i) {
    const std::size_t n = sendNow(p.fd[0], bufs, ec);
    ASSERT_FALSE(ec) << ec.message();
    if (n == 0) break;
    total += n;
  }
  ASSERT_GT(total, 0u);
  // Full: a blocking socket too, since the send does not wait (MSG_DONTWAIT).
  EXPECT_EQ(sendNow(p.fd[0], bufs, ec), 0u);
  EXPECT_FALSE(ec);
  EXPECT_EQ(p.drain().size(), total);
}

TEST(SendNow, APeerThatLeftIsAnErrorAndNoSignal) {
  SocketPair p;
  ::close(p.fd[1]);
  p.fd[1] = -1;
  const std::string bytes = "after the peer left";
  const std::array<asio::const_buffer, 1> bufs{asio::buffer(bytes)};
  boost::system::error_code ec;
  // Without MSG_NOSIGNAL this would be SIGPIPE, which ends the test binary.
  EXPECT_EQ(sendNow(p.fd[0], bufs, ec), 0u);
  EXPECT_EQ(ec.value(), EPIPE) << ec.message();
}

TEST(SendNow, NotASocketIsAnError) {
  boost::system::error_code ec;
  const std::string bytes = "x";
  const std::array<asio::const_buffer, 1> bufs{asio::buffer(bytes)};
  EXPECT_EQ(sendNow(-1, bufs, ec), 0u);
  EXPECT_EQ(ec.value(), EBADF) << ec.message();
}

TEST(SendNow, SendsAtMostTheCeilingOfBuffersAndTheCallerWritesTheRest) {
  SocketPair p;
  // kSendNowBuffers non-empty buffers go in one call; one more is left for
  // the caller's write of the rest, which sees a short count.
  std::vector<std::string> parts;
  for (std::size_t i = 0; i <= kSendNowBuffers; ++i)
    parts.push_back(std::string(1, static_cast<char>('a' + i)));
  std::vector<asio::const_buffer> bufs;
  for (const std::string& s : parts) {
    bufs.push_back(asio::const_buffer());  // empty ones do not count
    bufs.push_back(asio::buffer(s));
  }
  std::string expected;
  for (std::size_t i = 0; i < kSendNowBuffers; ++i)
    expected += parts[i];
  boost::system::error_code ec;
  const std::span<const asio::const_buffer> atCeiling(bufs.data(), 2 * kSendNowBuffers);
  EXPECT_EQ(sendNow(p.fd[0], atCeiling, ec), kSendNowBuffers);
  EXPECT_EQ(p.drain(), expected);

  EXPECT_EQ(sendNow(p.fd[0], bufs, ec), kSendNowBuffers);  // one past: the last is left
  EXPECT_FALSE(ec);
  EXPECT_EQ(p.drain(), expected);
}

// Several small buffers are copied into one block and sent with send();
// past kSendNowCopyMax bytes in all they go as they lie, by sendmsg. Either
// way the peer reads the same bytes in the same order: at the ceiling, one
// byte past it, and with the pieces cut at odd places.
TEST(SendNow, SmallWritesCopiedIntoOneBlockAndLargerOnesGatheredArriveTheSame) {
  for (const std::size_t total : {kSendNowCopyMax - 1, kSendNowCopyMax, kSendNowCopyMax + 1,
                                  std::size_t{3}, 4 * kSendNowCopyMax}) {
    SocketPair p;
    std::string all(total, '\0');
    for (std::size_t i = 0; i < total; ++i)
      all[i] = static_cast<char>('a' + (i * 7 + i / 26) % 26);
    // Three pieces, the first and last odd-sized, and an empty one between.
    const std::size_t a = total / 3 + 1, b = total / 2;
    const std::array<asio::const_buffer, 4> bufs{asio::buffer(all.data(), a), asio::const_buffer(),
                                                 asio::buffer(all.data() + a, b - a + 1),
                                                 asio::buffer(all.data() + b + 1, total - b - 1)};
    boost::system::error_code ec;
    EXPECT_EQ(sendNow(p.fd[0], bufs, ec), total) << total;
    EXPECT_FALSE(ec);
    EXPECT_EQ(p.drain(), all) << total;
  }
}

}  // namespace
}  // namespace relay::net
