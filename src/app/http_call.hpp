// A small blocking HTTP/1.1 client for the command line (healthcheck, the key
// CLI): one request on a fresh connection to an IP literal, read to EOF.
#pragma once

#include <string>
#include <vector>

namespace relay::app {

struct HttpTarget {
  std::string host = "127.0.0.1";  // an IP address
  int port = 9090;
  std::string path = "/";
};

// Parses "http://IP:PORT[/PATH]"; false on anything else. `path` keeps its
// default when the URL has none.
bool parseHttpTarget(const std::string& url, HttpTarget& target);

struct HttpResult {
  int status = 0;  // 0: no answer (cannot connect, timed out)
  std::string body;
  std::string error;  // why there is no answer
};

HttpResult httpCall(const HttpTarget& target, const std::string& method,
                    const std::vector<std::pair<std::string, std::string>>& headers,
                    const std::string& body, int timeoutSeconds = 5);

}  // namespace relay::app
