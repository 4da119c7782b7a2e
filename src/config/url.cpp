#include "url.hpp"

#include <algorithm>

#include "relay/config/parse.hpp"

namespace relay::config::detail {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

UrlCheck parseHttpUrl(std::string_view text) {
  UrlCheck out;
  const std::size_t sep = text.find("://");
  if (sep == std::string_view::npos) {
    out.error = "must be a URL starting with https:// or http://";
    return out;
  }
  out.url.scheme = lower(text.substr(0, sep));
  if (out.url.scheme != "http" && out.url.scheme != "https") {
    out.error = "must be a URL starting with https:// or http://";
    return out;
  }
  std::string_view rest = text.substr(sep + 3);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    out.error = "must not contain a query ('?') or a fragment ('#')";
    return out;
  }
  if (std::any_of(rest.begin(), rest.end(), [](char c) { return c == ' ' || c < 0x20; })) {
    out.error = "must not contain spaces or control characters";
    return out;
  }
  const std::size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  if (authority.find('@') != std::string_view::npos) {
    out.error = "must not contain credentials (user:password@); put the secret in api_key";
    return out;
  }
  if (authority.empty()) {
    out.error = "has no host";
    return out;
  }
  // Host and port follow the listener rules; a missing port is fine here.
  const bool bracketed = authority.front() == '[';
  const std::size_t colon = authority.rfind(':');
  const bool hasPort =
      colon != std::string_view::npos && (!bracketed || colon > authority.find(']'));
  try {
    parseEndpoint(hasPort ? std::string(authority) : std::string(authority) + ":0");
  } catch (const std::invalid_argument& e) {
    out.error = std::string("has an invalid host or port: ") + e.what();
    return out;
  }
  out.url.authority = lower(authority);
  if (slash != std::string_view::npos) out.url.path = std::string(rest.substr(slash));
  return out;
}

}  // namespace relay::config::detail
