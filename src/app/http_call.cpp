#include "http_call.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "relay/common/http_url.hpp"

namespace relay::app {

bool parseHttpTarget(const std::string& url, HttpTarget& t) {
  HttpUrlParse parsed = parseHttpUrl(url);
  if (!parsed.ok() || parsed.url.https || parsed.url.port.empty()) return false;
  const std::string& port = parsed.url.port;
  int value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value <= 0 || value > 65535)
    return false;
  t.host = parsed.url.host;
  t.port = value;
  if (!parsed.url.path.empty()) t.path = parsed.url.path;
  return true;
}

namespace {

// A blocking TCP connection to `host` (an IP literal) with send and receive
// timeouts; -1 with `error` set when none could be made.
int connectTo(const std::string& host, int port, int timeoutSeconds, std::string& error) {
  const bool v6 = host.find(':') != std::string::npos;
  int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    error = std::strerror(errno);
    return -1;
  }
  timeval tv{timeoutSeconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int rc = -1;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET6, host.c_str(), &a.sin6_addr) == 1)
      rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) == 1)
      rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0) {
    error = "cannot connect to " + host + ":" + std::to_string(port);
    ::close(fd);
    return -1;
  }
  return fd;
}

bool sendAll(int fd, const std::string& bytes) {
  for (std::size_t sent = 0; sent < bytes.size();) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

// Everything until the peer closes (at most 16 MiB).
std::string readToEnd(int fd) {
  std::string reply;
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<std::size_t>(n));
    if (reply.size() > (16u << 20)) break;
  }
  return reply;
}

// The body of a chunked answer (the relay chunks streamed answers; its JSON
// answers carry a length).
std::string unchunk(const std::string& body) {
  std::string plain;
  std::size_t at = 0;
  while (at < body.size()) {
    std::size_t eol = body.find("\r\n", at);
    if (eol == std::string::npos) break;
    std::size_t len = std::strtoul(body.c_str() + at, nullptr, 16);
    if (len == 0) break;
    plain.append(body, eol + 2, len);
    at = eol + 2 + len + 2;
  }
  return plain;
}

}  // namespace

HttpResult httpCall(const HttpTarget& t, const std::string& method,
                    const std::vector<std::pair<std::string, std::string>>& headers,
                    const std::string& body, int timeoutSeconds) {
  HttpResult out;
  std::string host = t.host;
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  if (host == "::") host = "::1";
  const int fd = connectTo(host, t.port, timeoutSeconds, out.error);
  if (fd < 0) return out;
  std::string req = method + " " + t.path + " HTTP/1.1\r\nhost: " + host +
                    "\r\nconnection: close\r\ncontent-length: " + std::to_string(body.size()) +
                    "\r\n";
  for (const auto& [name, value] : headers)
    req += name + ": " + value + "\r\n";
  req += "\r\n" + body;
  if (!sendAll(fd, req)) {
    out.error = "the connection broke while sending";
    ::close(fd);
    return out;
  }
  const std::string reply = readToEnd(fd);
  ::close(fd);
  if (reply.size() < 12 || reply.compare(0, 5, "HTTP/") != 0) {
    out.error = "no HTTP answer";
    return out;
  }
  out.status = std::atoi(reply.c_str() + 9);
  std::size_t headEnd = reply.find("\r\n\r\n");
  if (headEnd == std::string::npos) return out;
  std::string head = reply.substr(0, headEnd);
  out.body = reply.substr(headEnd + 4);
  for (char& c : head)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (head.find("transfer-encoding: chunked") != std::string::npos) out.body = unchunk(out.body);
  return out;
}

}  // namespace relay::app
