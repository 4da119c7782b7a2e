#include "healthcheck.hpp"

#include <arpa/inet.h>
#include <cstdio>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "relay/config/parse.hpp"

namespace relay::app {
namespace {

struct Target {
  std::string host = "127.0.0.1";
  int port = 9090;
  std::string path = "/healthz";
};

bool parseUrl(const std::string& url, Target& t) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return false;
  std::string rest = url.substr(kScheme.size());
  std::size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  t.path = slash == std::string::npos ? "/healthz" : rest.substr(slash);
  std::size_t colon = authority.rfind(':');
  if (colon == std::string::npos) return false;
  t.host = authority.substr(0, colon);
  t.port = std::atoi(authority.c_str() + colon + 1);
  return t.port > 0 && t.port < 65536;
}

}  // namespace

int healthcheck(const std::vector<std::string>& args) {
  Target t;
  for (std::size_t i = 1; i + 1 < args.size(); i += 2) {
    if (args[i] == "--url") {
      if (!parseUrl(args[i + 1], t)) {
        std::fprintf(stderr, "healthcheck: --url must be http://IP:PORT[/PATH]\n");
        return 2;
      }
    } else if (args[i] == "--config") {
      try {
        config::Config cfg = config::loadConfigFile(args[i + 1]);
        if (!cfg.admin.listen) {
          std::fprintf(stderr, "healthcheck: %s has no admin.listen\n", args[i + 1].c_str());
          return 2;
        }
        t.host = cfg.admin.listen->host;
        t.port = cfg.admin.listen->port;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "healthcheck: %s\n", e.what());
        return 2;
      }
    }
  }
  if (t.host == "0.0.0.0" || t.host.empty()) t.host = "127.0.0.1";
  if (t.host == "::") t.host = "::1";

  bool v6 = t.host.find(':') != std::string::npos;
  int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 1;
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int rc = -1;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<std::uint16_t>(t.port));
    if (::inet_pton(AF_INET6, t.host.c_str(), &a.sin6_addr) == 1)
      rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(t.port));
    if (::inet_pton(AF_INET, t.host.c_str(), &a.sin_addr) == 1)
      rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0) {
    std::fprintf(stderr, "healthcheck: cannot connect to %s:%d\n", t.host.c_str(), t.port);
    ::close(fd);
    return 1;
  }
  std::string req =
      "GET " + t.path + " HTTP/1.1\r\nhost: " + t.host + "\r\nconnection: close\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  char buf[64] = {};
  ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
  ::close(fd);
  bool ok = n >= 12 && std::string_view(buf, 12) == "HTTP/1.1 200";
  std::printf("%s\n", ok ? "healthy" : "unhealthy");
  return ok ? 0 : 1;
}

}  // namespace relay::app
