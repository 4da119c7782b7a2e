// The HTTP/1.1 request parser of H1Session (internal to src/net): our
// framing (relay/net/http1_parser.hpp) with the head and body stored where
// the exchange uses them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "relay/common/headers.hpp"
#include "relay/net/http1_parser.hpp"

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
  // The Connection fields named more than kMaxConnectionTokens distinct
  // fields: the session refuses the request (400).
  bool tooManyConnectionTokens = false;
  static constexpr std::size_t kMaxConnectionTokens = 16;

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
        addConnectionTokens(value);
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
    if (connectionTokens_.empty()) return;
    headers.removeIf([&](const HeaderField& f) {
      for (const std::string& token : connectionTokens_) {
        if (token == f.name) return true;
      }
      return false;
    });
  }
  void onBody(std::string_view bytes) override {
    // The room for the whole body is taken once its first bytes are read,
    // which is after the handler has authenticated the head (within the
    // body limit: a larger Content-Length was refused with the head).
    if (body.empty()) {
      if (auto length = contentLength()) body.reserve(static_cast<std::size_t>(*length));
    }
    body.append(bytes);
  }

  // The distinct names the Connection fields list, lowercased: each field
  // they name is removed once, so the cost is fields times at most
  // kMaxConnectionTokens, not times the list's length (a list of 32 K empty
  // elements against 8 K fields took 2 s per request when every field
  // walked the whole list).
  void addConnectionTokens(std::string_view list) {
    while (!list.empty()) {
      const std::size_t comma = list.find(',');
      std::string_view token = list.substr(0, comma);
      list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t'))
        token.remove_prefix(1);
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t'))
        token.remove_suffix(1);
      if (token.empty()) continue;
      std::string lower(token);
      for (char& c : lower)
        c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
      bool known = false;
      for (const std::string& t : connectionTokens_)
        known = known || t == lower;
      if (known) continue;
      if (connectionTokens_.size() == kMaxConnectionTokens) {
        tooManyConnectionTokens = true;
        return;
      }
      connectionTokens_.push_back(std::move(lower));
    }
  }

  std::vector<std::string> connectionTokens_;
};

}  // namespace relay::net
