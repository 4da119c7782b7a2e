// HTTP/2 sessions. Until the nghttp2 session lands, a client that starts HTTP/2
// gets the server preface and GOAWAY(HTTP_1_1_REQUIRED) (RFC 9113 §7), which
// clients treat as "retry over HTTP/1.1"; ALPN does not offer h2 meanwhile.
#include <boost/asio/write.hpp>

#include "session_common.hpp"

namespace relay::net {
namespace {

// An empty SETTINGS frame followed by GOAWAY(last stream 0, HTTP_1_1_REQUIRED).
constexpr unsigned char kRefusal[] = {
    0, 0, 0, 0x4, 0, 0, 0, 0, 0,                  // SETTINGS, empty
    0, 0, 8, 0x7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xd};  // GOAWAY

template <class Stream>
void refuse(Stream& stream) {
  boost::system::error_code ec;
  asio::write(stream, asio::buffer(kRefusal), ec);
  lowestLayer(stream).close(ec);
}

}  // namespace

void startHttp2(tcp::socket socket, std::string, std::shared_ptr<const SessionConfig>, Handler) {
  refuse(socket);
}

void startHttp2(TlsStream stream, std::shared_ptr<const SessionConfig>, Handler) {
  refuse(stream);
}

}  // namespace relay::net
