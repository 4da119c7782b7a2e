// Gateway MCP session ids: the upstream's Mcp-Session-Id wrapped with where it
// lives (server, instance) and whom it belongs to (the key's tenant name), and
// signed with HMAC-SHA256 under `mcp.session_secret`.
//
// Why signed and self-contained: any gateway process holding the same secret
// (a replica, or this one after a restart) can route a later request of the
// session to the instance that issued it without shared state, and a caller
// can neither forge a session nor point one at another instance or key. The
// id is signed, not encrypted: the caller can read the upstream id and its own
// key's name inside it, both of which it could learn anyway.
//
// Format: "kr1." + base64url(payload || HMAC-SHA256("kimi-relay mcp session v1\0"
// || payload)), no padding, where payload is
//   u8 version (2) | u16 server index | u16 instance index (big-endian) |
//   u8 n | n bytes tenant name | u8 m | m bytes protocol version |
//   the upstream's session id (the rest).
// Version 1 ids (no protocol version) are still read.
// Every character is visible ASCII, as Mcp-Session-Id requires.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "relay/common/base64url.hpp"

namespace relay::pipeline {

struct McpSession {
  std::uint16_t server = 0;     // position in config.mcp.servers
  std::uint16_t instance = 0;   // position in that server's instances
  std::string tenant;           // the key's name (1..255 bytes)
  std::string upstreamId;       // the upstream's Mcp-Session-Id (1..kMaxUpstreamIdBytes)
  std::string protocolVersion;  // what the server agreed at initialize (0..32 bytes; "" = unknown)

  bool operator==(const McpSession&) const = default;
};

class McpSessionCodec {
 public:
  // Longest upstream session id the gateway wraps; longer ones are refused.
  static constexpr std::size_t kMaxUpstreamIdBytes = 1024;

  // `secret` is the HMAC key (any length; the config demands >= 32 characters).
  explicit McpSessionCodec(std::string secret) : secret_(std::move(secret)) {}

  // Deterministic: the same session always encodes to the same id, so an
  // upstream echoing its id on every response gives the caller one stable id.
  // nullopt when a field is out of range (empty or too long).
  std::optional<std::string> encode(const McpSession& session) const;

  // The session inside `id`, or nullopt when it is malformed or its MAC does
  // not verify (compared in constant time before any field is trusted).
  std::optional<McpSession> decode(std::string_view id) const;

 private:
  std::string secret_;
};

// The secret for `configured` (config.mcp.session_secret): itself, or when it
// is empty a random 32-byte secret drawn once per process, the same for every
// worker and across config reloads. Sessions then survive a reload but not a
// restart, and replicas do not share them (docs/mcp.md).
std::string mcpSessionSecret(const std::string& configured);

// The session id's codec (common/base64url.hpp), named here for its tests.
using relay::base64UrlDecode;
using relay::base64UrlEncode;

}  // namespace relay::pipeline
