#include "relay/upstream/target.hpp"

#include <charconv>
#include <stdexcept>

namespace relay::upstream {

Target parseTarget(std::string_view url) {
  Target t;
  if (url.starts_with("https://")) {
    t.tls = true;
    t.port = 443;
    url.remove_prefix(8);
  } else if (url.starts_with("http://")) {
    t.tls = false;
    t.port = 80;
    url.remove_prefix(7);
  } else {
    throw std::invalid_argument("must start with https:// or http://");
  }
  std::size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : url.substr(slash);
  if (path.find_first_of("?#") != std::string_view::npos)
    throw std::invalid_argument("must not contain a query or fragment");
  if (authority.find('@') != std::string_view::npos)
    throw std::invalid_argument("must not contain credentials (use api_key)");
  std::string_view host = authority;
  std::string_view port;
  if (authority.starts_with('[')) {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) throw std::invalid_argument("unterminated IPv6 address");
    host = authority.substr(1, close - 1);
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') throw std::invalid_argument("unexpected text after IPv6 address");
      port = rest.substr(1);
    }
  } else if (std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) throw std::invalid_argument("has no host");
  t.host = std::string(host);
  bool explicitPort = false;
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535)
      throw std::invalid_argument("has an invalid port '" + std::string(port) + "'");
    explicitPort = value != (t.tls ? 443u : 80u);
    t.port = static_cast<std::uint16_t>(value);
  }
  while (!path.empty() && path.back() == '/')
    path.remove_suffix(1);
  t.basePath = std::string(path);
  bool v6 = t.host.find(':') != std::string::npos;
  t.hostHeader = v6 ? "[" + t.host + "]" : t.host;
  if (explicitPort) t.hostHeader += ":" + std::to_string(t.port);
  return t;
}

}  // namespace relay::upstream
