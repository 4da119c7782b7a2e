#include "relay/common/http_url.hpp"

#include <algorithm>

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

namespace relay {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool hasSpaceOrControl(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

constexpr std::string_view kNotHttp = "must be a URL starting with https:// or http://";

}  // namespace

HttpUrlParse parseHttpUrl(std::string_view text) {
  HttpUrlParse out;
  auto parsed = boost::urls::parse_uri(boost::core::string_view(text.data(), text.size()));
  if (!parsed) {
    const std::string scheme = lower(text.substr(0, text.find("://")));
    if (text.find("://") == std::string_view::npos || (scheme != "http" && scheme != "https"))
      out.error = kNotHttp;
    else if (hasSpaceOrControl(text))
      out.error = "must not contain spaces or control characters";
    else
      out.error = "is not a valid URL (RFC 3986)";
    return out;
  }
  const boost::urls::url_view& u = *parsed;
  if (u.scheme_id() != boost::urls::scheme::http && u.scheme_id() != boost::urls::scheme::https) {
    out.error = kNotHttp;
    return out;
  }
  if (!u.has_authority()) {
    out.error = kNotHttp;  // "http:/path": no "//"
    return out;
  }
  if (u.has_query() || u.has_fragment()) {
    out.error = "must not contain a query ('?') or a fragment ('#')";
    return out;
  }
  if (u.has_userinfo()) {
    out.error = "must not contain credentials (user:password@); put the secret in api_key";
    return out;
  }
  if (u.encoded_host().empty()) {
    out.error = "has no host";
    return out;
  }
  out.url.https = u.scheme_id() == boost::urls::scheme::https;
  out.url.host =
      lower(std::string_view(u.encoded_host_address().data(), u.encoded_host_address().size()));
  out.url.authority =
      lower(std::string_view(u.encoded_authority().data(), u.encoded_authority().size()));
  out.url.hasPort = u.has_port();
  if (u.has_port()) out.url.port = std::string(u.port());
  out.url.path = std::string(u.encoded_path());
  return out;
}

}  // namespace relay
