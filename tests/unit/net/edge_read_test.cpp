// The edge read on plain TCP (relay/net/edge_read.hpp): bytes land in the
// owner's flat_buffer when they arrive, a read that drained the socket makes
// the next read wait for readiness without touching the socket, and nothing
// is lost to the edge-triggered registration — an end that came with the
// last bytes included.
#include "relay/net/edge_read.hpp"

#include <chrono>
#include <cstddef>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <optional>
#include <string>
#include <sys/socket.h>
#include <tuple>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <gtest/gtest.h>

namespace relay::net {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::string text(const ReadBuffer& b) {
  const auto d = b.data();
  return std::string(static_cast<const char*>(d.data()), d.size());
}

// A connected pair of loopback sockets: `reader` is read with edge reads,
// `peer` writes to it (blocking writes of a few bytes).
class EdgeReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    peer.connect(acceptor.local_endpoint());
    acceptor.accept(reader);
  }

  void send(const std::string& bytes) { asio::write(peer, asio::buffer(bytes)); }

  // Starts one edge read of up to `chunk` bytes; its result lands in `done`.
  void start(std::size_t chunk) {
    done.reset();
    asyncEdgeRead(reader, inbox, chunk,
                  [this](boost::system::error_code ec, std::size_t n) { done.emplace(ec, n); });
  }

  // Runs the context until the read completes (the peer's bytes are on
  // loopback: they are there by the time epoll_wait is asked).
  void finish() {
    io.restart();  // a context that ran out of work stays stopped until then
    // Bounded: a read that waits for an event that never comes fails the
    // test instead of hanging it.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done && std::chrono::steady_clock::now() < until && io.run_one_until(until) > 0) {
    }
    ASSERT_TRUE(done) << "the read did not complete";
  }

  asio::io_context io{1};
  tcp::socket reader{io};
  tcp::socket peer{io};
  ReadBuffer inbox;
  std::optional<std::tuple<boost::system::error_code, std::size_t>> done;
};

// The same pair after one exchange: the socket's first read has turned the
// kernel's count (TCP_INQ) on, so every read here decides "drained" from it.
// (The first read of a socket cannot: it always tries the next read at once.)
class PrimedEdgeReadTest : public EdgeReadTest {
 protected:
  void SetUp() override {
    EdgeReadTest::SetUp();
    send("prime");
    start(64);
    finish();
    ASSERT_EQ(text(inbox), "prime");
    inbox.consume(inbox.size());
    int inq = 0;
    socklen_t len = sizeof inq;
    ASSERT_EQ(::getsockopt(reader.native_handle(), SOL_TCP, TCP_INQ, &inq, &len), 0);
    ASSERT_EQ(inq, 1);
  }
};

TEST_F(EdgeReadTest, BytesLandInTheBufferWithTheirCount) {
  send("hello");
  start(64);
  finish();
  EXPECT_FALSE(std::get<0>(*done));
  EXPECT_EQ(std::get<1>(*done), 5u);
  EXPECT_EQ(text(inbox), "hello");
}

TEST_F(EdgeReadTest, APendingReadHoldsNoBuffer) {
  start(16 * 1024);  // nothing sent: the read waits
  io.restart();
  io.poll();
  EXPECT_FALSE(done);
  EXPECT_EQ(inbox.capacity(), 0u);  // its first try found nothing and let go
  send("x");
  finish();
  EXPECT_EQ(text(inbox), "x");
}

TEST_F(EdgeReadTest, AReadTriedAtOnceThatFindsNothingGivesBackTheRoomItMade) {
  // Bytes the owner has not parsed yet (the HTTP/1.1 session's first
  // request, while its reader starts the next read).
  const std::string unparsed = "GET / HTTP/1.1\r\n";
  inbox.commit(asio::buffer_copy(inbox.prepare(unparsed.size()), asio::buffer(unparsed)));
  start(16 * 1024);  // tried at once (a new socket): nothing there yet
  io.restart();
  io.poll();
  ASSERT_FALSE(done);
  EXPECT_EQ(text(inbox), unparsed);
  EXPECT_LT(inbox.capacity(), 1024u);  // not 16 KiB held while it waits
  send("x");
  finish();
  EXPECT_EQ(text(inbox), unparsed + "x");
}

TEST_F(EdgeReadTest, TheFirstReadAsksTheKernelForWhatIsLeft) {
  int inq = -1;
  socklen_t len = sizeof inq;
  ASSERT_EQ(::getsockopt(reader.native_handle(), SOL_TCP, TCP_INQ, &inq, &len), 0);
  EXPECT_EQ(inq, 0);
  send("first");
  start(64);
  finish();
  ASSERT_EQ(::getsockopt(reader.native_handle(), SOL_TCP, TCP_INQ, &inq, &len), 0);
  EXPECT_EQ(inq, 1);
}

TEST_F(PrimedEdgeReadTest, AfterADrainingReadTheNextReadDoesNotTouchTheSocketWhenStarted) {
  send("second");
  start(64);
  finish();  // nothing left behind: drained
  inbox.consume(inbox.size());

  send("third");  // bytes are waiting, but no event has been collected yet
  start(64);
  // Asio's own read would have tried the socket at once and completed with
  // the bytes already in the buffer; the edge read waits for the event.
  EXPECT_EQ(inbox.size(), 0u);
  finish();  // and the edge brings it: nothing is lost
  EXPECT_FALSE(std::get<0>(*done));
  EXPECT_EQ(text(inbox), "third");
}

TEST_F(PrimedEdgeReadTest, AfterAFullReadTheNextReadTriesAtOnce) {
  send("0123456789");
  start(4);  // fills its 4 bytes: more may be there
  finish();
  EXPECT_EQ(text(inbox), "0123");
  start(4);
  EXPECT_EQ(text(inbox), "01234567");  // read when started, from what was left
  finish();
  EXPECT_EQ(std::get<1>(*done), 4u);
}

TEST_F(PrimedEdgeReadTest, BytesThatArriveBetweenReadsAreNotLost) {
  send("a");
  start(64);
  finish();
  // An event arrives while no read is waiting: the reactor only notes it.
  send("b");
  io.restart();
  io.poll();
  start(64);
  finish();
  EXPECT_EQ(text(inbox), "ab");
}

TEST_F(PrimedEdgeReadTest, TheOwnerMayConsumeWhileAReadIsPending) {
  send("head");
  start(64);
  finish();
  start(64);         // pending
  inbox.consume(2);  // the parse takes part of what is buffered meanwhile
  send("tail");
  finish();
  EXPECT_EQ(text(inbox), "adtail");
  inbox.consume(inbox.size());  // and all of it: the buffer starts over
  start(64);
  send("more");
  finish();
  EXPECT_EQ(text(inbox), "more");
}

TEST_F(PrimedEdgeReadTest, EndOfStreamIsEofWithNothingCommitted) {
  send("last");
  peer.shutdown(tcp::socket::shutdown_send);
  start(64);
  finish();
  EXPECT_EQ(text(inbox), "last");
  start(64);
  finish();
  EXPECT_EQ(std::get<0>(*done), asio::error::eof);
  EXPECT_EQ(std::get<1>(*done), 0u);
  EXPECT_EQ(text(inbox), "last");
}

TEST_F(PrimedEdgeReadTest, AnEndThatCameWithTheLastBytesIsReadNext) {
  start(64);  // waiting before anything arrives
  io.restart();
  io.poll();
  ASSERT_FALSE(done);
  // The bytes and the FIN arrive together: one event, and the recv that
  // takes the bytes also takes the FIN, so no event will ever follow. The
  // read must not count the socket as drained, or the next one waits forever.
  send("last");
  peer.shutdown(tcp::socket::shutdown_send);
  finish();
  EXPECT_EQ(text(inbox), "last");
  start(64);
  finish();
  EXPECT_EQ(std::get<0>(*done), asio::error::eof);
}

TEST_F(PrimedEdgeReadTest, BytesLeftBehindByAFullReadAreReadNext) {
  send(std::string(100, 'x'));
  start(64);
  finish();
  EXPECT_EQ(std::get<1>(*done), 64u);
  start(64);
  finish();
  EXPECT_EQ(std::get<1>(*done), 36u);
}

TEST_F(EdgeReadTest, ClosingCancelsAPendingReadWithNothingCommitted) {
  send("x");
  start(64);
  finish();
  start(64);
  reader.close();
  send("late");
  finish();
  EXPECT_EQ(std::get<0>(*done), asio::error::operation_aborted);
  EXPECT_EQ(std::get<1>(*done), 0u);
  EXPECT_EQ(text(inbox), "x");
}

TEST_F(EdgeReadTest, ABufferAtItsLimitEndsTheReadWithAnError) {
  ReadBuffer small(8);
  send("0123456789");
  done.reset();
  asyncEdgeRead(reader, small, 16,
                [this](boost::system::error_code ec, std::size_t n) { done.emplace(ec, n); });
  finish();
  EXPECT_EQ(std::get<0>(*done), asio::error::no_buffer_space);
  EXPECT_EQ(small.size(), 0u);
}

}  // namespace
}  // namespace relay::net
