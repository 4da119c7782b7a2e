// The HTTP/1.1 write side (src/net/h1_writer.hpp) over a loopback pair with
// small socket buffers, so that "the socket took part of it" happens on
// every run, not only under load: what a partial send leaves is kept, goes
// out before anything written after it, and arrives byte for byte; a write
// that waits has the stall deadline; a reset caller makes the writer gone.
#include "h1_writer.hpp"

#include <array>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>

#include "writer_test_util.hpp"

namespace relay::net {
namespace {

using writer_test::bigBytes;
using writer_test::chunkOf;
using writer_test::kStall;
using Room = H1Writer<tcp::socket>::Room;

class H1WriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    // The receiver's window is fixed at connect: set it small first.
    peer.open(tcp::v4());
    peer.set_option(asio::socket_base::receive_buffer_size(4096));
    peer.connect(acceptor.local_endpoint());
    acceptor.accept(socket);
    socket.set_option(asio::socket_base::send_buffer_size(4096));
    socket.non_blocking(true);               // as the session makes it
    socket.set_option(tcp::no_delay(true));  // so is this: each send leaves at once
  }

  // TCP segments the writer's socket has sent: with no_delay, a small send
  // is one segment, so this counts sends.
  unsigned segmentsOut() {
    TcpInfo info{};
    socklen_t len = sizeof info;
    EXPECT_EQ(::getsockopt(socket.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &len), 0);
    EXPECT_GE(len, sizeof info) << "this kernel does not report tcpi_segs_out";
    return info.segsOut;
  }

  // The kernel's tcp_info as far as tcpi_segs_out (Linux 4.2): glibc's
  // struct ends before it, and <linux/tcp.h> cannot be included beside
  // <netinet/tcp.h>. The kernel only ever appends to it.
  struct TcpInfo {
    tcp_info base;
    std::uint64_t pacingRate, maxPacingRate, bytesAcked, bytesReceived;
    std::uint32_t segsOut, segsIn;
  };
  static_assert(offsetof(TcpInfo, segsOut) == 136, "tcpi_segs_out's offset in the kernel's struct");

  // Runs `task` while the peer reads `expected` bytes in all (what was sent
  // before included); both must end within a few seconds.
  std::optional<bool> runReading(Task<bool> task, std::size_t expected) {
    return writer_test::runReading(io, peer, got, std::move(task), expected);
  }

  // What has arrived at the peer, once it is `expected` bytes in all (or
  // after 5 s: the comparison then fails).
  std::string arrived(std::size_t expected) {
    peer.non_blocking(true);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    char buf[65536];
    while (got.size() < expected && std::chrono::steady_clock::now() < until) {
      boost::system::error_code ec;
      const std::size_t n = peer.read_some(asio::buffer(buf), ec);
      if (ec == asio::error::would_block) {
        ::pollfd p{peer.native_handle(), POLLIN, 0};
        ::poll(&p, 1, 50);
        continue;
      }
      if (ec) break;
      got.append(buf, n);
    }
    return got;
  }

  asio::io_context io{1};
  tcp::socket socket{io};
  tcp::socket peer{io};
  H1Writer<tcp::socket> writer{socket, kStall};
  std::string got;
};

TEST_F(H1WriterTest, AChunkTheSocketTakesIsSentWithTheHeldHeadInOneGo) {
  const std::string head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
  writer.holdHead(head);
  const unsigned segments = segmentsOut();
  EXPECT_EQ(writer.chunkNow("data: 1\n\n"), std::optional<bool>(true));
  EXPECT_FALSE(writer.hasKept());
  EXPECT_EQ(arrived((head + chunkOf("data: 1\n\n")).size()), head + chunkOf("data: 1\n\n"));
  EXPECT_EQ(segmentsOut() - segments, 1u)
      << "the head and the first chunk left in more than one send";
  // The head went once.
  EXPECT_EQ(writer.chunkNow("data: 2\n\n"), std::optional<bool>(true));
  const std::string both = head + chunkOf("data: 1\n\n") + chunkOf("data: 2\n\n");
  EXPECT_EQ(arrived(both.size()), both);
}

TEST_F(H1WriterTest, WhatAPartialChunkLeavesIsKeptAndWrittenWhole) {
  const std::string big = bigBytes(4 << 20);
  EXPECT_EQ(writer.chunkNow(big), std::nullopt);  // the socket took part of it
  ASSERT_TRUE(writer.hasKept());
  const std::size_t kept = writer.keptBytes();
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, chunkOf(big).size());
  // Nothing else goes while bytes are kept: the next chunk is refused now
  // (nullopt, nothing sent), not written into the middle of this one.
  EXPECT_EQ(writer.chunkNow("x"), std::nullopt);
  EXPECT_EQ(writer.keptBytes(), kept);

  // What is kept is where the send stopped, not a copy: the caller gives
  // the same bytes again.
  EXPECT_EQ(runReading(writer.writeKept(big, Room::kFullThisTurn), chunkOf(big).size()),
            std::optional<bool>(true));
  EXPECT_FALSE(writer.hasKept());
  EXPECT_EQ(got, chunkOf(big));
}

TEST_F(H1WriterTest, AKeptChunkGoesWithItsHeldHeadBeforeTheNextChunkAndTheLastChunk) {
  const std::string head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
  writer.holdHead(head);
  const std::string big = bigBytes(2 << 20);
  ASSERT_EQ(writer.chunkNow(big), std::nullopt);
  const std::string expected = head + chunkOf(big) + chunkOf("tail") + "0\r\n\r\n";
  EXPECT_EQ(runReading(writer.writeKept(big, Room::kFullThisTurn), (head + chunkOf(big)).size()),
            std::optional<bool>(true));
  EXPECT_EQ(runReading(writer.chunk("tail", true), expected.size()), std::optional<bool>(true));
  EXPECT_EQ(got, expected);
  EXPECT_FALSE(writer.hasKept());
}

// A caller that does not give the kept chunk's bytes back (other bytes, or
// none: chunk() or writeKept() alone) gets false and a connection that
// writes nothing more, never a frame it did not make.
TEST_F(H1WriterTest, AKeptChunkNotFollowedByItsOwnBytesEndsTheConnection) {
  const std::string big = bigBytes(2 << 20);
  ASSERT_EQ(writer.chunkNow(big), std::nullopt);
  const std::size_t sent = chunkOf(big).size() - writer.keptBytes();
  EXPECT_EQ(runReading(writer.chunk("tail", true), sent), std::optional<bool>(false));
  EXPECT_TRUE(writer.gone());
  EXPECT_FALSE(writer.hasKept());
  EXPECT_EQ(got, chunkOf(big).substr(0, sent));
}

TEST_F(H1WriterTest, AnAnswerWhoseBodyTheSocketDoesNotTakeIsKeptAndWrittenWhole) {
  const std::string head = "HTTP/1.1 200 OK\r\ncontent-length: 3145728\r\n\r\n";
  std::string body = bigBytes(3 << 20);
  const std::string whole = head + body;
  EXPECT_TRUE(writer.answerNow(head, body, false));
  ASSERT_TRUE(writer.hasKept());
  EXPECT_TRUE(body.empty());  // moved into the writer, not copied
  EXPECT_EQ(runReading(writer.writeKept({}, Room::kFullThisTurn), whole.size()),
            std::optional<bool>(true));
  EXPECT_EQ(got, whole);
}

TEST_F(H1WriterTest, AHeadTheSocketDoesNotTakeWholeIsKeptFromWhereItStopped) {
  std::string head = "HTTP/1.1 200 OK\r\n";
  while (head.size() < (1 << 20))
    head += "x-filler: " + bigBytes(100) + "\r\n";
  head += "content-length: 5\r\n\r\n";
  std::string body = "hello";
  EXPECT_TRUE(writer.answerNow(head, body, false));
  ASSERT_TRUE(writer.hasKept());
  EXPECT_GT(writer.keptBytes(), 5u);  // part of the head, and the body
  EXPECT_EQ(runReading(writer.writeKept({}, Room::kFullThisTurn), head.size() + 5),
            std::optional<bool>(true));
  EXPECT_EQ(got, head + "hello");
}

TEST_F(H1WriterTest, TheAnswerToHeadCarriesNoBody) {
  const std::string head = "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n";
  std::string body = "hello";
  EXPECT_TRUE(writer.answerNow(head, body, true));
  EXPECT_FALSE(writer.hasKept());
  socket.shutdown(tcp::socket::shutdown_send);
  peer.non_blocking(false);
  boost::system::error_code ec;
  asio::read(peer, asio::dynamic_buffer(got), ec);  // to the end
  EXPECT_EQ(ec, asio::error::eof);
  EXPECT_EQ(got, head);
}

TEST_F(H1WriterTest, AWriteThatWaitsForRoomHasTheStallDeadline) {
  const std::string big = bigBytes(4 << 20);
  std::optional<bool> result;
  const auto before = SteadyClock::now();
  asio::co_spawn(io, writer.chunk(big, false), [&](std::exception_ptr, bool ok) { result = ok; });
  io.poll();  // the send took what fits; the rest waits for the peer to read
  const auto after = SteadyClock::now();
  ASSERT_FALSE(result);
  EXPECT_TRUE(writer.writing());
  EXPECT_GE(writer.stallDeadline(), before + kStall);
  EXPECT_LE(writer.stallDeadline(), after + kStall);

  asio::async_read(peer, asio::dynamic_buffer(got), asio::transfer_exactly(chunkOf(big).size()),
                   [](boost::system::error_code, std::size_t) {});
  io.restart();
  io.run_for(std::chrono::seconds(10));
  EXPECT_EQ(result, std::optional<bool>(true));
  EXPECT_FALSE(writer.writing());
  EXPECT_EQ(got, chunkOf(big));
}

// The rest of a write after a send that found the socket full: with
// kFullThisTurn it does not send before the socket's next writable edge
// (no send that would return EAGAIN); with kTryFirst it sends at once. The
// two are told apart where it matters: an answer kept, then the caller
// reads everything and the loop takes the edge that brought, before the
// write of the rest begins (a handler that waited after respondNow()).
class H1WriterAfterTheEdgeTest : public H1WriterTest {
 protected:
  // A write that waited, so that the socket's writable edges reach the
  // loop from now on; all of it read.
  void registerForRoom() {
    const std::string first = bigBytes(1 << 20);
    ASSERT_EQ(runReading(writer.chunk(first, false), chunkOf(first).size()),
              std::optional<bool>(true));
    got.clear();
  }

  // Once every byte sent is acknowledged no more room will come, so no more
  // edges: the loop runs a moment with no write waiting and takes the ones
  // that came.
  void takeTheEdges() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    int queued = -1;
    while ((::ioctl(socket.native_handle(), SIOCOUTQ, &queued) != 0 || queued != 0) &&
           std::chrono::steady_clock::now() < until) {
      ::pollfd p{socket.native_handle(), 0, 0};
      ::poll(&p, 1, 10);
    }
    ASSERT_EQ(queued, 0);
    asio::steady_timer moment(io, std::chrono::milliseconds(50));
    moment.async_wait([](boost::system::error_code) {});
    io.restart();
    io.run();
  }

  // Leaves an answer kept, and the edge of the room made for it taken.
  void keepAnAnswerAndTakeTheEdge() {
    registerForRoom();
    std::string body = bigBytes(3 << 20);
    whole = head + body;
    ASSERT_TRUE(writer.answerNow(head, body, false));
    ASSERT_TRUE(writer.hasKept());
    const std::size_t sent = whole.size() - writer.keptBytes();
    arrived(sent);  // the caller takes all that went: the socket has room
    ASSERT_EQ(got.size(), sent);
    takeTheEdges();
  }

  const std::string head = "HTTP/1.1 200 OK\r\ncontent-length: 3145728\r\n\r\n";
  std::string whole;
};

// More pieces than one send takes (kSendNowBuffers): the first send takes
// what it was offered and the socket is not full, so the rest must not wait
// for an edge (none comes: the loop took the last): it goes at once.
TEST_F(H1WriterAfterTheEdgeTest, AWriteOfMorePiecesThanOneSendTakesDoesNotWaitForRoom) {
  registerForRoom();
  takeTheEdges();
  std::array<std::string, kSendNowBuffers + 1> pieces;
  std::array<asio::const_buffer, kSendNowBuffers + 1> bufs;
  std::string whole;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    pieces[i] = "piece " + std::to_string(i) + "\n";
    bufs[i] = asio::buffer(pieces[i]);
    whole += pieces[i];
  }
  EXPECT_EQ(runReading(writer.writeAll(bufs), whole.size()), std::optional<bool>(true));
  EXPECT_EQ(got, whole);
}

TEST_F(H1WriterAfterTheEdgeTest, AWriteOfTheRestBegunLaterTriesFirst) {
  keepAnAnswerAndTakeTheEdge();
  EXPECT_EQ(runReading(writer.writeKept({}, Room::kTryFirst), whole.size()),
            std::optional<bool>(true));
  EXPECT_EQ(got, whole);
}

TEST_F(H1WriterAfterTheEdgeTest, AWriteOfTheRestInTheSameTurnWaitsForAnEdgeBeforeItSends) {
  keepAnAnswerAndTakeTheEdge();
  // Told that the socket was found full in this turn, the write waits for
  // the next edge: none comes (the socket has room and nothing is queued),
  // so nothing is sent. Asio's own write would try first and go.
  const std::size_t before = got.size();
  std::optional<bool> result;
  asio::co_spawn(io, writer.writeKept({}, Room::kFullThisTurn),
                 [&](std::exception_ptr, bool ok) { result = ok; });
  io.restart();
  io.run_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(result);
  EXPECT_TRUE(writer.writing());
  peer.non_blocking(true);
  char byte;
  boost::system::error_code ec;
  peer.read_some(asio::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, asio::error::would_block) << "a byte was sent";
  EXPECT_EQ(got.size(), before);
  socket.close();  // the waiting write ends (operation_aborted)
  io.restart();
  io.run_for(std::chrono::seconds(1));
  EXPECT_EQ(result, std::optional<bool>(false));
}

TEST_F(H1WriterTest, ACallerThatResetTheConnectionMakesTheWriterGone) {
  peer.set_option(asio::socket_base::linger(true, 0));
  peer.close();  // a reset
  // The first sends may still be taken before the reset is seen.
  std::optional<bool> sent;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  do {
    sent = writer.chunkNow("data: 1\n\n");
  } while (sent == std::optional<bool>(true) && std::chrono::steady_clock::now() < until);
  EXPECT_EQ(sent, std::optional<bool>(false));
  EXPECT_TRUE(writer.gone());
  EXPECT_FALSE(writer.hasKept());
}

TEST_F(H1WriterTest, NothingIsWrittenOnAClosedSocket) {
  socket.close();
  std::string body = "hello";
  EXPECT_FALSE(writer.answerNow("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", body, false));
  EXPECT_TRUE(writer.gone());
  EXPECT_FALSE(writer.hasKept());
}

}  // namespace
}  // namespace relay::net
