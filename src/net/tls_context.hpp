// Server-side TLS contexts (private to net/).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/ssl/context.hpp>

namespace relay::net {

// TLS 1.2 minimum, forward-secret AEAD suites only, ALPN selecting "h2" (when
// `offerH2`) or "http/1.1"; a client that offers no ALPN gets HTTP/1.1.
// Throws std::runtime_error naming the file when the chain or key cannot be
// loaded or do not match.
std::shared_ptr<boost::asio::ssl::context> makeServerTlsContext(const std::string& certFile,
                                                                const std::string& keyFile,
                                                                bool offerH2);

// The protocol ALPN settled on for `ssl`, or "" when none.
std::string_view negotiatedAlpn(const SSL* ssl);

}  // namespace relay::net
