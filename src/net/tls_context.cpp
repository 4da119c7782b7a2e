#include "tls_context.hpp"

#include <stdexcept>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace relay::net {
namespace {

// Mozilla's "intermediate" TLS 1.2 list; TLS 1.3 suites are all AEAD already.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

std::string lastOpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

// Picks h2 when offered (and enabled), else http/1.1; no overlap = no ALPN.
int selectAlpn(SSL*, const unsigned char** out, unsigned char* outLen, const unsigned char* in,
               unsigned int inLen, void* arg) {
  const bool offerH2 = arg != nullptr;
  const unsigned char* h1 = nullptr;
  for (unsigned int i = 0; i < inLen;) {
    unsigned int len = in[i];
    const unsigned char* proto = in + i + 1;
    if (i + 1 + len > inLen) break;
    std::string_view p(reinterpret_cast<const char*>(proto), len);
    if (offerH2 && p == "h2") {
      *out = proto;
      *outLen = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    if (p == "http/1.1") h1 = proto;
    i += 1 + len;
  }
  if (h1) {
    *out = h1;
    *outLen = 8;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

std::shared_ptr<boost::asio::ssl::context> makeServerTlsContext(const std::string& certFile,
                                                                const std::string& keyFile,
                                                                bool offerH2) {
  namespace ssl = boost::asio::ssl;
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(
      native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1)
    throw std::runtime_error("TLS: cannot set cipher suites: " + lastOpenSslError());
  if (SSL_CTX_use_certificate_chain_file(native, certFile.c_str()) != 1)
    throw std::runtime_error("TLS certificate '" + certFile +
                             "' cannot be loaded: " + lastOpenSslError());
  if (SSL_CTX_use_PrivateKey_file(native, keyFile.c_str(), SSL_FILETYPE_PEM) != 1)
    throw std::runtime_error("TLS private key '" + keyFile +
                             "' cannot be loaded: " + lastOpenSslError());
  if (SSL_CTX_check_private_key(native) != 1)
    throw std::runtime_error("TLS private key '" + keyFile + "' does not match certificate '" +
                             certFile + "'");
  SSL_CTX_set_alpn_select_cb(native, selectAlpn, offerH2 ? native : nullptr);
  return ctx;
}

std::string_view negotiatedAlpn(const SSL* ssl) {
  const unsigned char* data = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(ssl, &data, &len);
  return data ? std::string_view(reinterpret_cast<const char*>(data), len) : std::string_view();
}

}  // namespace relay::net
