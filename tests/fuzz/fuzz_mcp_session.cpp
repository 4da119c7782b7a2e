// Gateway MCP session ids (pipeline/mcp_session.hpp), which callers send back
// in Mcp-Session-Id: decode() on any bytes, ids signed per the documented
// format around any payload (so decode's checks after the MAC run too), the
// encode -> decode round trip of a session built from the input, and
// base64url both ways.
//
// Input: an id as a caller would send it; the same bytes also make the
// session and the payload. Seeds: corpus/mcp_session/ (ids encode() made
// under kSecret for a few sessions, and some that are not ids).
#include <array>
#include <cstddef>
#include <cstdint>
#include <fuzzer/FuzzedDataProvider.h>
#include <optional>
#include <string>
#include <string_view>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "fuzz_check.hpp"
#include "relay/pipeline/mcp_session.hpp"

namespace {

using relay::pipeline::base64UrlDecode;
using relay::pipeline::base64UrlEncode;
using relay::pipeline::McpSession;
using relay::pipeline::McpSessionCodec;

constexpr std::string_view kSecret = "fuzz-mcp-session-secret-32-chars";

// "kr1." + base64url(payload || HMAC-SHA256("kimi-relay mcp session v1\0" ||
// payload)): the format as mcp_session.hpp documents it, written here from
// that text rather than from the implementation.
std::string signedId(std::string_view payload) {
  std::string input("kimi-relay mcp session v1", 25);
  input.push_back('\0');
  input.append(payload);
  std::array<unsigned char, 32> mac{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), kSecret.data(), static_cast<int>(kSecret.size()),
       reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac.data(), &len);
  std::string raw(payload);
  raw.append(reinterpret_cast<const char*>(mac.data()), len);
  return "kr1." + base64UrlEncode(raw);
}

bool visibleAscii(std::string_view s) {
  for (char c : s)
    if (c <= 0x20 || c >= 0x7f) return false;
  return true;
}

// A decoded session must be exactly what its id says, field by field.
void checkDecoded(const McpSessionCodec& codec, std::string_view id, const McpSession& s) {
  FUZZ_CHECK(!s.tenant.empty() && s.tenant.size() <= 255, "decoded tenant out of range");
  FUZZ_CHECK(!s.upstreamId.empty(), "decoded upstream id is empty");
  const std::optional<std::string> again = codec.encode(s);
  if (s.upstreamId.size() > McpSessionCodec::kMaxUpstreamIdBytes) return;
  // The payload's first byte is its format: 2 is written today, 1 (no
  // protocol version inside) is still read.
  const std::optional<std::string> raw = base64UrlDecode(id.substr(4));
  FUZZ_CHECK(raw && !raw->empty(), "a decoded id is base64url after its prefix");
  if (static_cast<unsigned char>((*raw)[0]) == 2) {
    FUZZ_CHECK(again == std::string(id), "a decoded session must encode back to its id");
  } else {
    FUZZ_CHECK(static_cast<unsigned char>((*raw)[0]) == 1, "only formats 1 and 2 decode");
    FUZZ_CHECK(s.protocolVersion.empty(), "a format-1 id carries no protocol version");
    FUZZ_CHECK(again && codec.decode(*again) == s,
               "a format-1 session re-encodes to the same session");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const McpSessionCodec codec{std::string(kSecret)};
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  // 1. Whatever a caller sends.
  if (std::optional<McpSession> s = codec.decode(input)) checkDecoded(codec, input, *s);

  // 2. base64url: any bytes round-trip, and a text that decodes is the one
  //    spelling encode() gives those bytes.
  const std::string encoded = base64UrlEncode(input);
  FUZZ_CHECK(base64UrlDecode(encoded) == std::string(input), "base64url round trip");
  if (std::optional<std::string> bytes = base64UrlDecode(input)) {
    FUZZ_CHECK(base64UrlEncode(*bytes) == input, "base64url has one spelling per byte string");
  }

  // 3. A correctly signed id around the input as payload: decode() may refuse
  //    it (wrong version, bad tenant length) but must never misread it.
  const std::string forged = signedId(input);
  if (std::optional<McpSession> s = codec.decode(forged)) {
    FUZZ_CHECK(input.size() > 6 && (static_cast<unsigned char>(input[0]) == 1 ||
                                    static_cast<unsigned char>(input[0]) == 2),
               "only a format 1 or 2 payload decodes");
    checkDecoded(codec, forged, *s);
  }

  // 4. A session made from the input: encode() takes it exactly when its
  //    fields are in range, and decode() gives it back unchanged.
  FuzzedDataProvider provider(data, size);
  McpSession session;
  session.server = provider.ConsumeIntegral<std::uint16_t>();
  session.instance = provider.ConsumeIntegral<std::uint16_t>();
  session.tenant = provider.ConsumeRandomLengthString(300);
  session.upstreamId = provider.ConsumeRemainingBytesAsString();
  const std::optional<std::string> id = codec.encode(session);
  const bool inRange = !session.tenant.empty() && session.tenant.size() <= 255 &&
                       !session.upstreamId.empty() &&
                       session.upstreamId.size() <= McpSessionCodec::kMaxUpstreamIdBytes;
  FUZZ_CHECK(id.has_value() == inRange, "encode() refuses exactly the out-of-range fields");
  if (!id) return 0;
  FUZZ_CHECK(visibleAscii(*id), "an Mcp-Session-Id is visible ASCII");
  FUZZ_CHECK(codec.decode(*id) == session, "encode -> decode must round-trip exactly");
  FUZZ_CHECK(!McpSessionCodec("another secret, also 32 chars...").decode(*id),
             "an id made under another secret must not decode");
  // Any one character changed (to another of the alphabet) breaks the MAC.
  const std::size_t at = 4 + (session.server % (id->size() - 4));
  std::string altered = *id;
  altered[at] = altered[at] == 'A' ? 'B' : 'A';
  FUZZ_CHECK(!codec.decode(altered), "an altered id must not decode");
  return 0;
}
