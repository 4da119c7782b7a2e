// http(s) URLs of the config (upstream base URLs, MCP servers, allowed
// origins) and of the command-line helpers: the gateway's one URL parser,
// Boost.URL (RFC 3986) underneath. Only scheme://host[:port][/path] is
// accepted: credentials (user:pass@) belong in api_key, and a query or a
// fragment has no meaning for a base URL.
#pragma once

#include <string>
#include <string_view>

namespace relay {

struct HttpUrl {
  bool https = true;      // the scheme, matched without regard to case
  std::string host;       // lowercased; an IPv6 literal without its brackets
  std::string authority;  // host[:port] as written, host lowercased (brackets kept)
  std::string port;       // as written; "" when absent
  bool hasPort = false;   // a ':' after the host, even with no digits
  std::string path;       // "" or starting with '/', as written (still percent-encoded)
  std::string_view scheme() const { return https ? "https" : "http"; }
};

struct HttpUrlParse {
  HttpUrl url;
  std::string error;  // non-empty: why the text is refused (never quotes it)
  bool ok() const { return error.empty(); }
};

// Parses `text`; a port is returned as written (callers check its range with
// their own wording).
HttpUrlParse parseHttpUrl(std::string_view text);

}  // namespace relay
