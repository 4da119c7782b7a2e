// Signing and checking gateway MCP session ids (format in mcp_session.hpp).
#include "relay/pipeline/mcp_session.hpp"

#include <array>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace relay::pipeline {
namespace {

constexpr std::string_view kPrefix = "kr1.";
constexpr std::uint8_t kVersion1 = 1;  // decoded only: no protocol version inside
constexpr std::uint8_t kVersion = 2;
constexpr std::size_t kMaxProtocolVersionBytes = 32;
constexpr std::size_t kMacBytes = 32;
// Domain separation: a MAC made for something else under the same secret
// can never pass as a session id.
constexpr std::string_view kMacContext{"kimi-relay mcp session v1\0", 26};
// Longest id decode() looks at; anything longer cannot be one of ours.
constexpr std::size_t kMaxIdChars = kPrefix.size() +
                                    (5 + 1 + 255 + 1 + kMaxProtocolVersionBytes +
                                     McpSessionCodec::kMaxUpstreamIdBytes + kMacBytes) *
                                        4 / 3 +
                                    4;

std::array<unsigned char, kMacBytes> mac(const std::string& secret, std::string_view payload) {
  std::string input;
  input.reserve(kMacContext.size() + payload.size());
  input.append(kMacContext).append(payload);
  std::array<unsigned char, kMacBytes> out{};
  unsigned int len = 0;
  // HMAC() accepts an empty key; the config never gives one (see mcpSessionSecret).
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
            reinterpret_cast<const unsigned char*>(input.data()), input.size(), out.data(), &len) ||
      len != kMacBytes) {
    throw std::runtime_error("HMAC-SHA256 failed");  // OpenSSL broken: a bug, not input
  }
  return out;
}

}  // namespace

std::optional<std::string> McpSessionCodec::encode(const McpSession& s) const {
  if (s.tenant.empty() || s.tenant.size() > 255 || s.upstreamId.empty() ||
      s.upstreamId.size() > kMaxUpstreamIdBytes ||
      s.protocolVersion.size() > kMaxProtocolVersionBytes)
    return std::nullopt;
  std::string payload;
  payload.reserve(7 + s.tenant.size() + s.protocolVersion.size() + s.upstreamId.size() + kMacBytes);
  payload += static_cast<char>(kVersion);
  payload += static_cast<char>(s.server >> 8);
  payload += static_cast<char>(s.server & 0xff);
  payload += static_cast<char>(s.instance >> 8);
  payload += static_cast<char>(s.instance & 0xff);
  payload += static_cast<char>(s.tenant.size());
  payload += s.tenant;
  payload += static_cast<char>(s.protocolVersion.size());
  payload += s.protocolVersion;
  payload += s.upstreamId;
  auto tag = mac(secret_, payload);
  payload.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  return std::string(kPrefix) + base64UrlEncode(payload);
}

std::optional<McpSession> McpSessionCodec::decode(std::string_view id) const {
  if (!id.starts_with(kPrefix) || id.size() > kMaxIdChars) return std::nullopt;
  std::optional<std::string> raw = base64UrlDecode(id.substr(kPrefix.size()));
  if (!raw || raw->size() < 6 + kMacBytes) return std::nullopt;
  std::string_view payload(raw->data(), raw->size() - kMacBytes);
  auto expected = mac(secret_, payload);
  // Constant time: the comparison must not tell a forger how many bytes matched.
  if (CRYPTO_memcmp(expected.data(), raw->data() + payload.size(), kMacBytes) != 0)
    return std::nullopt;
  // Authentic from here on; the checks below only guard against our own bugs
  // or an id made under the same secret by an incompatible version.
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(payload[i]); };
  if (byte(0) != kVersion && byte(0) != kVersion1) return std::nullopt;
  McpSession s;
  s.server = static_cast<std::uint16_t>(byte(1) << 8 | byte(2));
  s.instance = static_cast<std::uint16_t>(byte(3) << 8 | byte(4));
  std::size_t n = byte(5);
  if (n == 0 || payload.size() <= 6 + n) return std::nullopt;
  s.tenant = std::string(payload.substr(6, n));
  std::size_t at = 6 + n;
  if (byte(0) == kVersion) {
    std::size_t m = byte(at);
    if (m > kMaxProtocolVersionBytes || payload.size() <= at + 1 + m) return std::nullopt;
    s.protocolVersion = std::string(payload.substr(at + 1, m));
    at += 1 + m;
  }
  s.upstreamId = std::string(payload.substr(at));
  return s;
}

std::string mcpSessionSecret(const std::string& configured) {
  if (!configured.empty()) return configured;
  // Drawn once per process (thread-safe static initialisation), so every
  // worker and every reloaded snapshot signs with the same key.
  static const std::string generated = [] {
    std::array<unsigned char, 32> bytes{};
    if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1)
      throw std::runtime_error("cannot draw a random MCP session secret");
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }();
  return generated;
}

}  // namespace relay::pipeline
