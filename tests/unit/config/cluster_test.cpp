// cluster: the Redis URL (credentials, TLS, database) and the failure mode;
// the URL's password never appears in an error or in display().
#include <gtest/gtest.h>

#include "config_test_support.hpp"
#include "relay/config/parse.hpp"

namespace relay::config {
namespace {

using testing::errorOf;
using testing::fakeEnv;
using testing::withMinimal;

Cluster clusterOf(std::string_view section, std::map<std::string, std::string> env = {}) {
  return parseConfig(withMinimal(std::string(section)), "relay.yaml", fakeEnv(std::move(env)))
      .cluster;
}

TEST(ConfigCluster, AbsentMeansNoSharedState) {
  EXPECT_FALSE(clusterOf("").redis);
  // An unset ${REDIS_URL:-} too.
  EXPECT_FALSE(clusterOf("cluster: {redis_url: \"${REDIS_URL:-}\"}\n").redis);
}

TEST(ConfigCluster, ReadsTheUrlAndTheDefaults) {
  const Cluster c = clusterOf("cluster:\n  redis_url: redis://10.0.0.5:6380/2\n");
  ASSERT_TRUE(c.redis);
  EXPECT_FALSE(c.redis->tls);
  EXPECT_EQ(c.redis->host, "10.0.0.5");
  EXPECT_EQ(c.redis->port, 6380);
  EXPECT_EQ(c.redis->db, 2u);
  EXPECT_TRUE(c.redis->password.empty());
  EXPECT_EQ(c.redisTimeoutMs, 50u);
  EXPECT_EQ(c.onRedisFailure, OnRedisFailure::kLocal);
}

TEST(ConfigCluster, CredentialsTlsAndIpv6) {
  Cluster c = clusterOf(
      "cluster:\n  redis_url: ${REDIS_URL}\n  on_redis_failure: reject\n"
      "  redis_timeout_ms: 20\n",
      {{"REDIS_URL", "rediss://relay:p%40ss%3Aword@redis.internal/0"}});
  ASSERT_TRUE(c.redis);
  EXPECT_TRUE(c.redis->tls);
  EXPECT_EQ(c.redis->user, "relay");
  EXPECT_EQ(c.redis->password, "p@ss:word");
  EXPECT_EQ(c.redis->port, 6379);
  EXPECT_EQ(c.onRedisFailure, OnRedisFailure::kReject);
  EXPECT_EQ(c.redisTimeoutMs, 20u);
  EXPECT_EQ(c.redis->display(), "rediss://redis.internal:6379/0");
  c = clusterOf("cluster: {redis_url: \"redis://:only-password@[::1]:7000\"}\n");
  EXPECT_EQ(c.redis->user, "");
  EXPECT_EQ(c.redis->password, "only-password");
  EXPECT_EQ(c.redis->host, "::1");
  EXPECT_EQ(c.redis->display(), "redis://[::1]:7000/0");
  c = clusterOf("cluster: {redis_url: \"redis://bare-password@h\"}\n");
  EXPECT_EQ(c.redis->password, "bare-password") << "as redis-cli reads it";
}

TEST(ConfigCluster, BadUrlsSayWhatToFixWithoutQuotingThem) {
  const std::string secret = "Sup3rSecretRedisPass";
  auto error = [&](std::string url) {
    return errorOf(withMinimal("cluster:\n  redis_url: \"" + url + "\"\n"));
  };
  std::string e = error("http://:" + secret + "@h:6379");
  EXPECT_NE(e.find("must start with redis:// or rediss://"), std::string::npos) << e;
  EXPECT_EQ(e.find(secret), std::string::npos);
  e = error("redis://:" + secret + "@h:99999");
  EXPECT_NE(e.find("invalid port"), std::string::npos) << e;
  EXPECT_EQ(e.find(secret), std::string::npos);
  e = error("redis://:" + secret + "%zz@h");
  EXPECT_NE(e.find("%-escape"), std::string::npos) << e;
  EXPECT_EQ(e.find(secret), std::string::npos);
  EXPECT_NE(error("redis://h/x").find("database number"), std::string::npos);
  EXPECT_NE(error("redis://h?timeout=1").find("query"), std::string::npos);
  EXPECT_NE(error("redis://:pw@").find("needs a host"), std::string::npos);
}

TEST(ConfigCluster, OnlyTheDocumentedKeysAndModes) {
  EXPECT_NE(errorOf(withMinimal("cluster: {redis_url: \"redis://h\", on_redis_failure: ignore}\n"))
                .find("must be local"),
            std::string::npos);
  EXPECT_NE(
      errorOf(withMinimal("cluster: {redis_url: \"redis://h\", replicas: 3}\n")).find("replicas"),
      std::string::npos);
  EXPECT_NE(errorOf(withMinimal("cluster: {redis_url: \"redis://h\", redis_timeout_ms: 0}\n")),
            "<parsed>");
}

}  // namespace
}  // namespace relay::config
