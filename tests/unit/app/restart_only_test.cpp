// The settings a reload leaves for a restart (src/app/restart_only.cpp):
// each one alone is named, nothing a reload applies is, and the list in
// docs/operations.md is the same as the code's.
#include "restart_only.hpp"

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace relay::app {
namespace {

using Change = std::function<void(config::Config&)>;

config::Config base() {
  config::Config c;
  c.server.listen = {{"127.0.0.1", 8080}};
  config::TlsListener tls;
  tls.address.host = "127.0.0.1";
  tls.address.port = 8443;
  tls.certFile = "/etc/relay/cert.pem";
  tls.keyFile = "/etc/relay/key.pem";
  c.server.tlsListen.push_back(tls);
  c.server.workers = 2;
  c.admin.listen = config::Endpoint{"127.0.0.1", 9090};
  config::RedisUrl redis;
  redis.host = "redis.internal";
  redis.password = "hunter2";
  c.cluster.redis = redis;
  c.stateDir = "/var/lib/kimi-relay";
  c.log.accessLog = "stdout";
  return c;
}

// One change per restart-only key, each of that key alone.
const std::map<std::string, Change>& restartOnly() {
  static const std::map<std::string, Change> changes{
      {"server.listen",
       [](config::Config& c) {
         c.server.listen.push_back({"127.0.0.1", 8081});
       }},
      {"server.tls_listen", [](config::Config& c) { c.server.tlsListen[0].address.port = 9443; }},
      {"server.http2.max_concurrent_streams",
       [](config::Config& c) { c.server.http2.maxConcurrentStreams += 1; }},
      {"server.http2.initial_window_bytes",
       [](config::Config& c) { c.server.http2.initialWindowBytes += 1; }},
      {"server.workers", [](config::Config& c) { c.server.workers = 1; }},
      {"server.max_request_bytes", [](config::Config& c) { c.server.maxRequestBytes += 1; }},
      {"server.max_header_bytes", [](config::Config& c) { c.server.maxHeaderBytes += 1; }},
      {"server.max_connection_body_bytes",
       [](config::Config& c) { c.server.maxConnectionBodyBytes = 1 << 20; }},
      {"server.max_connections", [](config::Config& c) { c.server.maxConnections += 1; }},
      {"server.max_connections_per_ip",
       [](config::Config& c) { c.server.maxConnectionsPerIp += 1; }},
      {"server.header_timeout_ms", [](config::Config& c) { c.server.headerTimeoutMs += 1; }},
      {"server.body_timeout_ms", [](config::Config& c) { c.server.bodyTimeoutMs += 1; }},
      {"server.idle_timeout_ms", [](config::Config& c) { c.server.idleTimeoutMs += 1; }},
      {"server.busy_poll_us", [](config::Config& c) { c.server.busyPollUs = 100; }},
      {"server.memory_release_ms", [](config::Config& c) { c.server.memoryReleaseMs += 1; }},
      {"server.send_buffer_bytes", [](config::Config& c) { c.server.sendBufferBytes = 16384; }},
      {"admin.listen", [](config::Config& c) { c.admin.listen->port = 9091; }},
      {"cluster.redis_url", [](config::Config& c) { c.cluster.redis->password = "hunter3"; }},
      {"cluster.redis_timeout_ms", [](config::Config& c) { c.cluster.redisTimeoutMs += 1; }},
      {"cluster.on_redis_failure",
       [](config::Config& c) { c.cluster.onRedisFailure = config::OnRedisFailure::kReject; }},
      {"log.access_log", [](config::Config& c) { c.log.accessLog = "/var/log/relay.jsonl"; }},
      {"state_dir", [](config::Config& c) { c.stateDir = "/srv/relay"; }},
  };
  return changes;
}

TEST(RestartOnly, EveryKeyOfTheTableHasAChangeHereAndNoOther) {
  std::set<std::string> table;
  for (const RestartOnlySetting& s : restartOnlySettings())
    EXPECT_TRUE(table.insert(std::string(s.key)).second) << "twice: " << s.key;
  std::set<std::string> tested;
  for (const auto& [key, change] : restartOnly())
    tested.insert(key);
  EXPECT_EQ(table, tested);
}

TEST(RestartOnly, EachChangeAloneNamesItsKeyAndNothingElse) {
  for (const auto& [key, change] : restartOnly()) {
    config::Config now = base();
    change(now);
    EXPECT_EQ(restartOnlyChanges(base(), now), std::vector<std::string_view>{key}) << key;
  }
}

TEST(RestartOnly, TheSameConfigAndWhatAReloadAppliesNameNothing) {
  EXPECT_TRUE(restartOnlyChanges(base(), base()).empty());
  const std::vector<Change> applied{
      // The same listeners in another order.
      [](config::Config& c) {
        c.server.listen.push_back({"127.0.0.1", 8081});
        c.server.listen.insert(c.server.listen.begin(), config::Endpoint{"127.0.0.1", 8082});
      },
      [](config::Config& c) { c.server.drainTimeoutMs += 1; },
      [](config::Config& c) { c.server.metricsOnMain = true; },
      [](config::Config& c) { c.server.trustedProxies.push_back(config::Cidr{}); },
      // A new certificate for a listener that stays is reloaded.
      [](config::Config& c) { c.server.tlsListen[0].certFile = "/etc/relay/new-cert.pem"; },
      [](config::Config& c) { c.log.level = "debug"; },
      [](config::Config& c) { c.admin.keySha256 = std::string(64, 'a'); },
      [](config::Config& c) { c.keys.push_back(config::Key{}); },
      [](config::Config& c) { c.upstreams.push_back(config::Upstream{}); },
  };
  for (std::size_t i = 0; i < applied.size(); ++i) {
    config::Config was = base();
    config::Config now = base();
    applied[i](now);
    if (i == 0) {  // the same two extra listeners, in the other order
      was.server.listen.push_back({"127.0.0.1", 8082});
      was.server.listen.push_back({"127.0.0.1", 8081});
    }
    EXPECT_TRUE(restartOnlyChanges(was, now).empty()) << "change " << i;
  }
}

TEST(RestartOnly, TheWarningNamesTheKeysInTableOrderAndNoValue) {
  config::Config now = base();
  restartOnly().at("state_dir")(now);
  restartOnly().at("server.workers")(now);
  restartOnly().at("cluster.redis_url")(now);
  EXPECT_EQ(restartOnlyWarning(restartOnlyChanges(base(), now)),
            "reload: server.workers, cluster.redis_url, state_dir change only on restart; the "
            "running values stay");
  EXPECT_EQ(restartOnlyWarning({"server.send_buffer_bytes"}),
            "reload: server.send_buffer_bytes changes only on restart; the running values stay");
  EXPECT_EQ(restartOnlyWarning({}), "");
  EXPECT_EQ(restartOnlyWarning(restartOnlyChanges(base(), now)).find("hunter"), std::string::npos);
}

// The operator's list (docs/operations.md, "Reload") names each key of the
// table as it is written in the file.
TEST(RestartOnly, OperationsDocNamesEveryKey) {
  std::ifstream file(RELAY_SOURCE_DIR "/docs/operations.md");
  ASSERT_TRUE(file) << RELAY_SOURCE_DIR "/docs/operations.md";
  std::stringstream text;
  text << file.rdbuf();
  const std::string doc = text.str();
  const auto from = doc.find("## Reload");
  const auto to = doc.find("\n## ", from + 1);
  ASSERT_NE(from, std::string::npos);
  const std::string section = doc.substr(from, to - from);
  for (const RestartOnlySetting& s : restartOnlySettings()) {
    std::string quoted(1, '`');
    quoted.append(s.key).push_back('`');
    EXPECT_NE(section.find(quoted), std::string::npos)
        << s.key << " is not in the Reload section of docs/operations.md";
  }
  // ... and its "needs a restart" column names nothing else.
  std::set<std::string> table;
  for (const RestartOnlySetting& s : restartOnlySettings())
    table.insert(std::string(s.key));
  const auto header = section.find("| applied by a reload | needs a restart |");
  ASSERT_NE(header, std::string::npos);
  std::istringstream rows(section.substr(header));
  std::string row;
  std::getline(rows, row);  // the header
  std::getline(rows, row);  // |---|---|
  std::set<std::string> named;
  std::size_t names = 0;
  while (std::getline(rows, row) && row.starts_with("|")) {
    const auto split = row.find(" | ");
    ASSERT_NE(split, std::string::npos) << row;
    const std::string right = row.substr(split + 3);
    for (std::size_t at = right.find('`'); at != std::string::npos;) {
      const auto end = right.find('`', at + 1);
      ASSERT_NE(end, std::string::npos) << row;
      const std::string key = right.substr(at + 1, end - at - 1);
      named.insert(key);
      ++names;
      at = right.find('`', end + 1);
    }
  }
  EXPECT_EQ(named, table) << "the doc's restart column and the table differ";
  EXPECT_EQ(names, named.size()) << "a key is named twice in the restart column";
}

}  // namespace
}  // namespace relay::app
