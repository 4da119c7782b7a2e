// The HTTP/1.1 request parser of H1Session (internal to src/net): Beast's
// framing (lengths, chunking, limits) with the head and body stored where
// the exchange uses them.
#pragma once

#include <cstdint>
#include <string>

#include <boost/beast/http/basic_parser.hpp>

#include "relay/common/headers.hpp"
#include "session_common.hpp"

namespace relay::net {

namespace beast = boost::beast;
namespace http = boost::beast::http;

// The request parser: the method, the target and the end-to-end fields go
// straight into what the exchange will carry, the body into a string; no
// copy of the head is kept in Beast's own fields. Hop-by-hop fields — the
// fixed ones and those the Connection field names (RFC 9110 §7.6.1) — stay
// here; what framing needs of them is kept aside.
class H1RequestParser final : public http::basic_parser<true> {
 public:
  std::string method;
  std::string target;
  Headers headers;  // end-to-end fields, names lowercased
  std::string body;
  std::string expect;
  bool transferEncoding = false;  // a Transfer-Encoding field was sent
  bool isHead = false;

 private:
  void on_request_impl(http::verb verb, beast::string_view methodText,
                       beast::string_view targetText, int, boost::system::error_code&) override {
    method.assign(methodText.data(), methodText.size());
    target.assign(targetText.data(), targetText.size());
    isHead = verb == http::verb::head;
  }
  void on_response_impl(int, beast::string_view, int, boost::system::error_code&) override {}
  void on_field_impl(http::field f, beast::string_view name, beast::string_view value,
                     boost::system::error_code&) override {
    const std::string_view v(value.data(), value.size());
    switch (f) {  // Beast knows the common names: no string work for them
      case http::field::connection:
        if (!connection_.empty()) connection_ += ',';
        connection_.append(v);
        return;
      case http::field::transfer_encoding:
        transferEncoding = true;
        return;
      case http::field::expect:
        expect.assign(v);
        return;
      case http::field::keep_alive:
      case http::field::proxy_connection:
      case http::field::te:
      case http::field::upgrade:
      case http::field::trailer:
      case http::field::content_length:
      case http::field::http2_settings:
        return;
      default:
        if (headerDone_) return;  // a chunked body's trailer fields reach no one
        headers.add(std::string_view(name.data(), name.size()), v);
    }
  }
  void on_header_impl(boost::system::error_code&) override {
    headerDone_ = true;
    if (connection_.empty()) return;
    headers.removeIf([&](const HeaderField& f) { return listsToken(connection_, f.name); });
  }
  void on_body_init_impl(const boost::optional<std::uint64_t>& length,
                         boost::system::error_code&) override {
    if (length) body.reserve(static_cast<std::size_t>(*length));  // within body_limit
  }
  std::size_t on_body_impl(beast::string_view bytes, boost::system::error_code&) override {
    body.append(bytes.data(), bytes.size());
    return bytes.size();
  }
  void on_chunk_header_impl(std::uint64_t, beast::string_view,
                            boost::system::error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, beast::string_view bytes,
                                 boost::system::error_code&) override {
    body.append(bytes.data(), bytes.size());
    return bytes.size();
  }
  void on_finish_impl(boost::system::error_code&) override {}

  std::string connection_;
  bool headerDone_ = false;
};

}  // namespace relay::net
