// cluster: the Redis server that replicas share limits, concurrency and
// budgets through (docs/configuration.md "cluster").
#include <charconv>

#include "sections.hpp"

namespace relay::config {

std::string RedisUrl::display() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::string(tls ? "rediss://" : "redis://") + h + ":" + std::to_string(port) + "/" +
         std::to_string(db);
}

bool Cluster::operator==(const Cluster& o) const {
  auto same = [](const RedisUrl& a, const RedisUrl& b) {
    return a.tls == b.tls && a.host == b.host && a.port == b.port && a.db == b.db &&
           a.user == b.user && a.password == b.password;
  };
  if (redis.has_value() != o.redis.has_value()) return false;
  if (redis && !same(*redis, *o.redis)) return false;
  return redisTimeoutMs == o.redisTimeoutMs && onRedisFailure == o.onRedisFailure;
}

namespace detail {
namespace {

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX-decoding of the user and password; false on a malformed escape.
bool percentDecode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = hexDigit(in[i + 1]), lo = hexDigit(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

}  // namespace

// Never quotes the text: it may hold a password.
std::string parseRedisUrl(std::string_view text, RedisUrl& url) {
  if (text.starts_with("redis://")) {
    text.remove_prefix(8);
  } else if (text.starts_with("rediss://")) {
    url.tls = true;
    text.remove_prefix(9);
  } else {
    return "must start with redis:// or rediss:// (TLS), e.g. redis://127.0.0.1:6379/0";
  }
  if (text.find_first_of("?#") != std::string_view::npos)
    return "must not have a query or fragment: redis[s]://[[user]:password@]host[:port][/db]";
  std::string_view authority = text.substr(0, text.find('/'));
  std::string_view path = text.substr(authority.size());
  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority.remove_prefix(at + 1);
    std::string_view user = userinfo, password;
    if (auto colon = userinfo.find(':'); colon != std::string_view::npos) {
      user = userinfo.substr(0, colon);
      password = userinfo.substr(colon + 1);
    } else {
      // redis://PASSWORD@host, as redis-cli and most clients read it.
      password = userinfo;
      user = {};
    }
    if (!percentDecode(user, url.user) || !percentDecode(password, url.password))
      return "has a malformed %-escape in its user or password";
  }
  std::string_view host = authority, port;
  if (authority.starts_with('[')) {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return "has an IPv6 host without its closing ']'";
    host = authority.substr(1, close - 1);
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return "must be [ipv6]:port after an IPv6 host";
      port = rest.substr(1);
    }
  } else if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return "needs a host, e.g. redis://redis:6379/0";
  url.host = std::string(host);
  if (!port.empty() || authority.ends_with(':')) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535)
      return "has an invalid port: use 1 to 65535";
    url.port = static_cast<std::uint16_t>(value);
  }
  if (path.size() > 1) {
    std::string_view db = path.substr(1);
    unsigned value = 0;
    auto [end, ec] = std::from_chars(db.data(), db.data() + db.size(), value);
    if (ec != std::errc() || end != db.data() + db.size() || value > 1'000'000)
      return "has an invalid database number after '/': use a number such as 0";
    url.db = value;
  }
  return {};
}

Cluster readCluster(const Value& v) {
  Cluster c;
  const MapView m = v.map({"redis_url", "redis_timeout_ms", "on_redis_failure"});
  m.with("redis_url", [&](const Value& x) {
    std::string text = x.secret();
    if (text.empty()) return;  // an unset ${REDIS_URL:-}: no shared state
    RedisUrl url;
    if (std::string error = parseRedisUrl(text, url); !error.empty()) x.fail(error);
    c.redis = std::move(url);
  });
  m.with("redis_timeout_ms",
         [&](const Value& x) { c.redisTimeoutMs = x.unsignedInt<std::uint32_t>(1, 60'000); });
  m.with("on_redis_failure", [&](const Value& x) {
    std::string mode = x.string();
    if (mode == "local") {
      c.onRedisFailure = OnRedisFailure::kLocal;
    } else if (mode == "reject") {
      c.onRedisFailure = OnRedisFailure::kReject;
    } else {
      x.fail("must be local (serve on this replica's own limits) or reject (answer 503); got " +
             x.echo());
    }
  });
  return c;
}

}  // namespace detail
}  // namespace relay::config
