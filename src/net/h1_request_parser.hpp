// The HTTP/1.1 request parser of H1Session (internal to src/net): our
// framing (relay/net/http1_parser.hpp) with the head and body stored where
// the exchange uses them.
#pragma once

#include <string>

#include "relay/common/headers.hpp"
#include "relay/net/http1_parser.hpp"
#include "session_common.hpp"

namespace relay::net {

// The request parser: the method, the target and the end-to-end fields go
// straight into what the exchange will carry, the body into a string.
// Hop-by-hop fields — the fixed ones and those the Connection field names
// (RFC 9110 §7.6.1) — stay here; what framing needs of them is kept aside.
class H1RequestParser final : public http1::Parser {
 public:
  H1RequestParser() : Parser(/*request=*/true) {}

  std::string method;
  std::string target;
  Headers headers;  // end-to-end fields, names lowercased
  std::string body;
  std::string expect;
  bool transferEncoding = false;  // a Transfer-Encoding field was sent
  bool isHead = false;

 private:
  void onStartLine(std::string_view methodText, std::string_view targetText, int) override {
    method.assign(methodText);
    target.assign(targetText);
    isHead = methodText == "HEAD";
  }
  void onField(http1::FieldName kind, std::string_view name, std::string_view value) override {
    using http1::FieldName;
    switch (kind) {
      case FieldName::kConnection:
        if (!connection_.empty()) connection_ += ',';
        connection_.append(value);
        return;
      case FieldName::kTransferEncoding:
        transferEncoding = true;
        return;
      case FieldName::kExpect:
        expect.assign(value);
        return;
      case FieldName::kKeepAlive:
      case FieldName::kProxyConnection:
      case FieldName::kTe:
      case FieldName::kUpgrade:
      case FieldName::kTrailer:
      case FieldName::kContentLength:
      case FieldName::kHttp2Settings:
        return;
      case FieldName::kOther:
        headers.add(name, value);
        return;
    }
  }
  void onHeaderDone() override {
    if (auto length = contentLength())
      body.reserve(static_cast<std::size_t>(*length));  // within the body limit
    if (connection_.empty()) return;
    headers.removeIf([&](const HeaderField& f) { return listsToken(connection_, f.name); });
  }
  void onBody(std::string_view bytes) override { body.append(bytes); }

  std::string connection_;
};

}  // namespace relay::net
