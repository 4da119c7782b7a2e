// "host:port" listener addresses.
#include <algorithm>
#include <arpa/inet.h>
#include <charconv>
#include <stdexcept>
#include <string>

#include "relay/config/config.hpp"
#include "relay/config/parse.hpp"

namespace relay::config {

namespace {

bool isHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

bool isV6Char(char c) {
  return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') || c == ':' ||
         c == '.';
}

std::uint16_t parsePort(std::string_view text) {
  if (text.empty()) throw std::invalid_argument("missing port after ':'");
  if (text.size() > 5 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw std::invalid_argument("port must be a number between 0 and 65535");
  }
  unsigned value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  if (value > 65535) throw std::invalid_argument("port must be a number between 0 and 65535");
  return static_cast<std::uint16_t>(value);
}

}  // namespace

std::string Endpoint::text() const {
  if (host.find(':') != std::string::npos) return '[' + host + "]:" + std::to_string(port);
  return host + ':' + std::to_string(port);
}

Endpoint parseEndpoint(std::string_view text) {
  if (text.empty()) throw std::invalid_argument("empty address; expected host:port");
  Endpoint out;
  std::string_view rest;
  if (text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) throw std::invalid_argument("missing ']' after IPv6 host");
    const std::string_view host = text.substr(1, close - 1);
    if (host.empty() || host.find(':') == std::string_view::npos ||
        !std::all_of(host.begin(), host.end(), isV6Char)) {
      throw std::invalid_argument("'[...]' must hold an IPv6 address, e.g. [::1]:8080");
    }
    out.host = std::string(host);
    rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') {
      throw std::invalid_argument("expected ':port' after ']', e.g. [::1]:8080");
    }
    rest.remove_prefix(1);
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      throw std::invalid_argument("missing ':port'; expected host:port, e.g. 127.0.0.1:8080");
    }
    const std::string_view host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos) {
      throw std::invalid_argument("an IPv6 host needs brackets, e.g. [::1]:8080");
    }
    if (host.empty()) {
      throw std::invalid_argument(
          "missing host; use 0.0.0.0:PORT or [::]:PORT for every interface");
    }
    if (!std::all_of(host.begin(), host.end(), isHostChar)) {
      throw std::invalid_argument("host must be a name or an IP address");
    }
    out.host = std::string(host);
    rest = text.substr(colon + 1);
  }
  out.port = parsePort(rest);
  return out;
}

}  // namespace relay::config

namespace relay::config {

Cidr parseCidr(std::string_view text) {
  const std::size_t slash = text.find('/');
  const std::string host(text.substr(0, slash));
  Cidr out;
  if (::inet_pton(AF_INET, host.c_str(), out.address.data()) == 1) {
    out.v6 = false;
    out.prefix = 32;
  } else if (::inet_pton(AF_INET6, host.c_str(), out.address.data()) == 1) {
    out.v6 = true;
    out.prefix = 128;
  } else {
    throw std::invalid_argument("must be an IP address or block such as 10.0.0.0/8 or fd00::/8");
  }
  if (slash != std::string_view::npos) {
    std::string_view bits = text.substr(slash + 1);
    unsigned prefix = 0;
    auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), prefix);
    if (bits.empty() || ec != std::errc() || end != bits.data() + bits.size() ||
        prefix > out.prefix) {
      throw std::invalid_argument("the prefix length after '/' must be 0 to " +
                                  std::to_string(out.prefix));
    }
    out.prefix = prefix;
  }
  return out;
}

bool cidrContains(const Cidr& block, const std::array<std::uint8_t, 16>& address, bool v6) {
  if (block.v6 != v6) return false;
  unsigned full = block.prefix / 8;
  for (unsigned i = 0; i < full; ++i) {
    if (block.address[i] != address[i]) return false;
  }
  unsigned rest = block.prefix % 8;
  if (rest == 0) return true;
  auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (block.address[full] & mask) == (address[full] & mask);
}

}  // namespace relay::config
