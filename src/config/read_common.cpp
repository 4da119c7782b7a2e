// Field rules shared by several sections.
#include <algorithm>
#include <stdexcept>

#include "sections.hpp"

namespace relay::config::detail {

namespace {

bool isHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

constexpr std::size_t kMaxNameLength = 64;

}  // namespace

Catalog catalogOf(const std::vector<Upstream>& upstreams, const Mcp& mcp) {
  Catalog c;
  for (const Upstream& u : upstreams) {
    auto& served = c.modelsByUpstream[u.name];
    for (const auto& [clientId, upstreamId] : u.models) {
      c.models.insert(clientId);
      served.insert(clientId);
    }
  }
  for (const McpServer& s : mcp.servers)
    c.mcpServers.insert(s.name);
  return c;
}

Endpoint readEndpoint(const Value& v) {
  const std::string text = v.string();
  try {
    return parseEndpoint(text);
  } catch (const std::invalid_argument& e) {
    v.fail("invalid address " + v.echo() + ": " + e.what());
  }
}

std::uint32_t readIdleMs(const Value& v) {
  constexpr std::uint32_t kMinIdleMs = 100;
  constexpr std::uint32_t kMaxIdleMs = 3'600'000;  // an hour
  return v.unsignedInt<std::uint32_t>(kMinIdleMs, kMaxIdleMs);
}

std::uint32_t readIdleConnections(const Value& v) {
  // Above any file-descriptor limit a worker could be given.
  constexpr std::uint32_t kMaxIdleConnections = 1'000'000;
  return v.unsignedInt<std::uint32_t>(0, kMaxIdleConnections);
}

std::string readNonEmpty(const Value& v) {
  std::string s = v.string();
  if (s.empty()) v.fail("must not be empty");
  return s;
}

std::string readName(const Value& v) {
  std::string s = readNonEmpty(v);
  if (s.size() > kMaxNameLength || !std::all_of(s.begin(), s.end(), isNameChar)) {
    v.fail(v.echo() + " is not a valid name: use 1 to 64 letters, digits, '.', '_' or '-'");
  }
  return s;
}

bool isModelId(std::string_view id) {
  return !id.empty() && std::none_of(id.begin(), id.end(), [](char c) {
    return c == ' ' || c == 0x7f || static_cast<unsigned char>(c) < 0x20;
  });
}

std::string readModelId(const Value& v) {
  std::string s = readNonEmpty(v);
  if (!isModelId(s)) v.fail("a model id must not contain spaces or control characters");
  return s;
}

std::string readSha256(const Value& v) {
  std::string s = v.string();
  constexpr std::string_view kExpected = "must be a SHA-256 digest: 64 hexadecimal characters";
  if (s.size() != 64) {
    v.fail(std::string(kExpected) + " (got " + std::to_string(s.size()) + " characters" +
           "; store the digest of the key, never the key itself)");
  }
  if (!std::all_of(s.begin(), s.end(), isHex)) {
    v.fail(std::string(kExpected) + " (found a character that is not a hex digit)");
  }
  for (char& c : s) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

}  // namespace relay::config::detail
