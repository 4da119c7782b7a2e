// http(s) URLs in the config: upstream base URLs, MCP servers, allowed origins.
#pragma once

#include <string>
#include <string_view>

namespace relay::config::detail {

struct HttpUrl {
  std::string scheme;     // "http" or "https", lowercased
  std::string authority;  // host[:port] as written (host lowercased)
  std::string path;       // "" or starting with '/'; no query, no fragment
  bool isHttps() const { return scheme == "https"; }
  std::string text() const { return scheme + "://" + authority + path; }
};

struct UrlCheck {
  HttpUrl url;
  std::string error;  // non-empty: why the text is refused (never quotes it)
};

// Accepts scheme://host[:port][/path] (common/http_url.hpp, the one URL
// parser) whose host and port also pass the listener rules (parseEndpoint).
// Credentials (user:pass@), queries and fragments are refused: secrets belong
// in api_key, not in a URL.
UrlCheck parseHttpUrl(std::string_view text);

}  // namespace relay::config::detail
