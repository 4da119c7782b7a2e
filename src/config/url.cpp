#include "url.hpp"

#include "relay/common/http_url.hpp"
#include "relay/config/parse.hpp"

namespace relay::config::detail {

UrlCheck parseHttpUrl(std::string_view text) {
  UrlCheck out;
  HttpUrlParse parsed = relay::parseHttpUrl(text);
  if (!parsed.ok()) {
    out.error = std::move(parsed.error);
    return out;
  }
  const relay::HttpUrl& u = parsed.url;
  // Host and port follow the listener rules; a missing port is fine here.
  try {
    parseEndpoint(u.hasPort ? u.authority : u.authority + ":0");
  } catch (const std::invalid_argument& e) {
    out.error = std::string("has an invalid host or port: ") + e.what();
    return out;
  }
  out.url.scheme = std::string(u.scheme());
  out.url.authority = u.authority;
  out.url.path = u.path;
  return out;
}

}  // namespace relay::config::detail
