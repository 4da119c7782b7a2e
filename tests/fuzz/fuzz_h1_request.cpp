// The HTTP/1.1 server session (src/net/h1_session.cpp) fed what a client
// sends: request heads, bodies (Content-Length, chunked), pipelined requests,
// under small bounds (1 KiB heads, 4 KiB bodies). See session_harness.hpp for
// the input's option byte and the handler the paths choose.
//
// Checked: the session ends and is destroyed once the client is gone (or, for
// a silent client, by its own timeouts); every handler has returned; a handler
// sees no connection-specific field and no body over max_request_bytes; what
// the client receives parses as HTTP/1.1 responses, in request order, each
// whole unless a response was aborted on purpose or the client left first;
// nothing follows `connection: close`; answers the session gives by itself are
// 400, 408, 413 or 431 with a JSON body and close the connection; and every
// answer a handler was told was sent arrives whole.
//
// Input: the option byte (bit 2: the first 24 bytes arrive as the bytes the
// listener read before it chose HTTP/1.1), then the client's bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "relay/common/json_scan.hpp"
#include "session_harness.hpp"

namespace {

namespace http = boost::beast::http;
using relay::fuzz::ClientEnd;
using relay::fuzz::HandlerLog;

bool isSessionAnswer(unsigned status) {
  return status == 400 || status == 408 || status == 413 || status == 431;
}

void checkResponses(std::string_view wire, const HandlerLog& log, ClientEnd end) {
  std::size_t index = 0;  // final responses so far
  bool closeSaid = false;
  while (!wire.empty()) {
    FUZZ_CHECK(!closeSaid, "nothing follows an answer that said connection: close");
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    parser.eager(true);
    const bool toHead = index < log.methods.size() && log.methods[index] == "HEAD";
    parser.skip(toHead);
    boost::system::error_code ec;
    std::size_t used = 0;
    while (!parser.is_done() && used < wire.size()) {
      ec = {};
      const std::size_t n =
          parser.put(boost::asio::buffer(wire.data() + used, wire.size() - used), ec);
      used += n;
      if (ec == http::error::need_more) {
        ec = {};
        if (n == 0) break;
        continue;
      }
      if (ec) break;
    }
    FUZZ_CHECK(!ec, "the session's answers parse as HTTP/1.1 responses");
    if (!parser.is_done()) {
      FUZZ_CHECK(log.cut || end == ClientEnd::kEofAtOnce,
                 "an answer ends short only when aborted or when the client left first");
      break;
    }
    wire.remove_prefix(used);
    const auto& res = parser.get();
    FUZZ_CHECK(res.version() == 11, "answers are HTTP/1.1");
    const unsigned status = res.result_int();
    if (status < 200) {
      FUZZ_CHECK(status == 100, "the only interim answer is 100 Continue");
      continue;
    }
    closeSaid = !res.keep_alive();
    const auto seq = res.find("x-seq");
    if (seq != res.end()) {
      FUZZ_CHECK(seq->value() == std::to_string(index), "answers come in request order");
    } else if (index >= log.methods.size()) {
      FUZZ_CHECK(isSessionAnswer(status), "the session answers by itself with 400/408/413/431");
      FUZZ_CHECK(closeSaid, "an answer the session gives by itself closes the connection");
    } else {
      FUZZ_CHECK(status == 500, "a handler that answered nothing leaves a 500");
    }
    if (seq == res.end() && !toHead) {
      FUZZ_CHECK(!relay::validateJson(res.body()), "the session's own answers are JSON");
    }
    ++index;
  }
  for (std::size_t i = 0; i < log.delivered.size(); ++i) {
    FUZZ_CHECK(!log.delivered[i] || i < index, "an answer sent to the client arrives whole");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  relay::fuzz::ignoreSigpipe();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto end = static_cast<ClientEnd>(data[0] & 3);
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string initial;
  if (data[0] & 4) {
    initial = std::string(input.substr(0, 24));
    input.remove_prefix(initial.size());
  }
  auto log = std::make_shared<HandlerLog>();
  const relay::fuzz::Connection::Result result = relay::fuzz::Connection::run(
      end, input, relay::fuzz::sessionConfig(end), log,
      [&initial](relay::net::tcp::socket socket, relay::net::SessionContext context,
                 relay::net::Handler handler) {
        relay::net::startHttp1(std::move(socket), std::move(initial), std::move(context),
                               std::move(handler));
      });
  FUZZ_CHECK(log->running == 0, "every handler has returned once the session is gone");
  checkResponses(result.received, *log, end);
  return 0;
}
