// The HTTP/1.1 write side (src/net/h1_writer.hpp) over TLS, between two
// in-process TLS streams on a loopback pair. A TLS write is never known
// complete at once, so the writer's plain calls send nothing there:
// chunkNow() is nullopt (the caller awaits chunk()), and answerNow() keeps
// the whole answer for writeKept(). What goes through the TLS stream must
// arrive whole and in order, the held head first, with 4 KiB socket
// buffers so that every large write waits for room.
#include <charconv>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "h1_writer.hpp"
#include "writer_test_util.hpp"

namespace relay::net {
namespace {

using TlsStream = asio::ssl::stream<tcp::socket>;

using writer_test::bigBytes;
using writer_test::chunkOf;
using writer_test::kStall;

// A throw-away P-256 key and a certificate it signs for itself.
struct SelfSigned {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key{EVP_EC_gen("P-256"), &EVP_PKEY_free};
  std::unique_ptr<X509, decltype(&X509_free)> cert{X509_new(), &X509_free};

  SelfSigned() {
    X509* c = cert.get();
    X509_set_version(c, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(c), 1);
    X509_gmtime_adj(X509_getm_notBefore(c), -60);
    X509_gmtime_adj(X509_getm_notAfter(c), 3600);
    X509_NAME* name = X509_get_subject_name(c);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
    X509_set_issuer_name(c, name);
    X509_set_pubkey(c, key.get());
    signedOk = X509_sign(c, key.get(), EVP_sha256()) > 0;
  }
  bool signedOk = false;
};

class H1WriterTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(identity.key && identity.cert && identity.signedOk);
    // On the stream's own SSL object: it took its context's settings when
    // it was made, before this.
    ASSERT_EQ(SSL_use_certificate(server.native_handle(), identity.cert.get()), 1);
    ASSERT_EQ(SSL_use_PrivateKey(server.native_handle(), identity.key.get()), 1);
    client.set_verify_mode(asio::ssl::verify_none);

    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    client.next_layer().open(tcp::v4());
    client.next_layer().set_option(asio::socket_base::receive_buffer_size(4096));
    client.next_layer().connect(acceptor.local_endpoint());
    acceptor.accept(server.next_layer());
    server.next_layer().set_option(asio::socket_base::send_buffer_size(4096));
    server.next_layer().non_blocking(true);  // as the session makes it

    bool serverDone = false;
    bool clientDone = false;
    server.async_handshake(asio::ssl::stream_base::server, [&](boost::system::error_code ec) {
      EXPECT_FALSE(ec) << ec.message();
      serverDone = true;
    });
    client.async_handshake(asio::ssl::stream_base::client, [&](boost::system::error_code ec) {
      EXPECT_FALSE(ec) << ec.message();
      clientDone = true;
    });
    io.run_for(std::chrono::seconds(10));
    ASSERT_TRUE(serverDone && clientDone) << "the TLS handshake did not finish";
  }

  // Runs `task` while the client reads `expected` bytes (decrypted) in all.
  std::optional<bool> runReading(Task<bool> task, std::size_t expected) {
    return writer_test::runReading(io, client, got, std::move(task), expected);
  }

  SelfSigned identity;
  asio::io_context io{1};
  asio::ssl::context serverCtx{asio::ssl::context::tls_server};
  asio::ssl::context clientCtx{asio::ssl::context::tls_client};
  TlsStream server{io, serverCtx};
  TlsStream client{io, clientCtx};
  H1Writer<TlsStream> writer{server, kStall};
  std::string got;
};

TEST_F(H1WriterTlsTest, ChunkNowSendsNothingAndTheAwaitedChunksCarryTheHeldHeadFirst) {
  const std::string head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
  writer.holdHead(head);
  // Nothing may bypass the TLS stream: the plain call declines, and keeps
  // nothing (the caller owes the awaited chunk()).
  EXPECT_EQ(writer.chunkNow("data: 0\n\n"), std::nullopt);
  EXPECT_FALSE(writer.hasKept());

  const std::string big = bigBytes(2 << 20);
  auto both = [&]() -> Task<bool> {
    Task<bool> first = writer.chunk("data: 1\n\n", false);
    if (!co_await std::move(first)) co_return false;
    Task<bool> last = writer.chunk(big, true);
    co_return co_await std::move(last);
  };
  const std::string expected = head + chunkOf("data: 1\n\n") + chunkOf(big) + "0\r\n\r\n";
  EXPECT_EQ(runReading(both(), expected.size()), std::optional<bool>(true));
  EXPECT_EQ(got, expected);
  EXPECT_FALSE(writer.writing());
}

TEST_F(H1WriterTlsTest, AnAnswerIsKeptWholeAndWrittenThroughTheTlsStream) {
  const std::string head = "HTTP/1.1 200 OK\r\ncontent-length: 3145728\r\n\r\n";
  std::string body = bigBytes(3 << 20);
  const std::string whole = head + body;
  EXPECT_TRUE(writer.answerNow(head, body, false));
  ASSERT_TRUE(writer.hasKept());
  EXPECT_EQ(writer.keptBytes(), whole.size())
      << "a TLS answer is kept whole: nothing went around the TLS stream";
  EXPECT_EQ(runReading(writer.writeKept({}, decltype(writer)::Room::kTryFirst), whole.size()),
            std::optional<bool>(true));
  EXPECT_EQ(got, whole);
  EXPECT_FALSE(writer.hasKept());
}

TEST_F(H1WriterTlsTest, TheAnswerToHeadKeepsItsHeadOnly) {
  const std::string head = "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n";
  std::string body = "hello";
  EXPECT_TRUE(writer.answerNow(head, body, true));
  EXPECT_EQ(writer.keptBytes(), head.size());
  EXPECT_EQ(runReading(writer.writeKept({}, decltype(writer)::Room::kTryFirst), head.size()),
            std::optional<bool>(true));
  EXPECT_EQ(got, head);
  // And nothing after it: the next bytes are those of the next answer.
  std::string next = "ok";
  EXPECT_TRUE(writer.answerNow("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n", next, false));
  const std::string after = head + "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
  EXPECT_EQ(runReading(writer.writeKept({}, decltype(writer)::Room::kTryFirst), after.size()),
            std::optional<bool>(true));
  EXPECT_EQ(got, after);
}

}  // namespace
}  // namespace relay::net
