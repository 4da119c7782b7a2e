#include "relay/upstream/target.hpp"

#include <charconv>
#include <stdexcept>

#include "relay/common/http_url.hpp"

namespace relay::upstream {

Target parseTarget(std::string_view url) {
  HttpUrlParse parsed = parseHttpUrl(url);
  if (!parsed.ok()) throw std::invalid_argument(parsed.error);
  const HttpUrl& u = parsed.url;
  Target t;
  t.tls = u.https;
  t.port = t.tls ? 443 : 80;
  t.host = u.host;
  bool explicitPort = false;
  if (u.hasPort) {
    const std::string& port = u.port;
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 ||
        value > 65535)
      throw std::invalid_argument("has an invalid port '" + port + "'");
    explicitPort = value != (t.tls ? 443u : 80u);
    t.port = static_cast<std::uint16_t>(value);
  }
  std::string_view path = u.path;
  while (!path.empty() && path.back() == '/')
    path.remove_suffix(1);
  t.basePath = std::string(path);
  // Host: an IPv6 literal bracketed, the port when not the scheme's. (Appended
  // piece by piece: GCC 12 warns falsely, -Wrestrict, about ":" + to_string.)
  const bool v6 = t.host.find(':') != std::string::npos;
  t.hostHeader = v6 ? "[" + t.host + "]" : t.host;
  if (explicitPort) t.hostHeader.append(":").append(std::to_string(t.port));
  return t;
}

}  // namespace relay::upstream
