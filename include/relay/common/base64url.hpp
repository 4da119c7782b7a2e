// base64url without padding (RFC 4648 §5): the one codec of the gateway
// (MCP session ids, generated API keys). Decoding accepts exactly one
// spelling per byte string: no padding, no foreign alphabet, zero leftover bits.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace relay {

std::string base64UrlEncode(std::string_view bytes);
// nullopt when `text` is not the canonical encoding of some bytes.
std::optional<std::string> base64UrlDecode(std::string_view text);

}  // namespace relay
