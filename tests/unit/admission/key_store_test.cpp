// Callers' keys: stored as digests only, found by digest, and every way a
// presented key can be wrong gets its own answer.
#include "relay/admission/key_store.hpp"

#include <gtest/gtest.h>

namespace relay::admission {
namespace {

constexpr std::string_view kPlannerKey = "kr-planner-0123456789abcdefghijklmnopqrstuv";
constexpr std::string_view kWorkerKey = "kr-worker-zyxwvutsrqponmlkjihgfedcba9876543";

std::vector<config::Key> configuredKeys() {
  config::Key planner;
  planner.name = "planner";
  planner.sha256 = toHex(sha256(kPlannerKey));
  planner.models = {"kimi-k2"};
  config::Key worker;
  worker.name = "worker";
  worker.sha256 = toHex(sha256(kWorkerKey));
  return {planner, worker};
}

Headers bearer(std::string_view key) {
  Headers h;
  h.add("authorization", "Bearer " + std::string(key));
  return h;
}

TEST(KeyDigests, Sha256MatchesAKnownVector) {
  EXPECT_EQ(toHex(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Digest d{};
  ASSERT_TRUE(fromHex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD", d));
  EXPECT_EQ(d, sha256("abc"));
  EXPECT_FALSE(fromHex("ba78", d));
  EXPECT_FALSE(fromHex(std::string(64, 'g'), d));
}

TEST(KeyDigests, NewKeysAreDistinctAndWellFormed) {
  std::string a = generateKey();
  std::string b = generateKey();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), 3u + 43u);  // "kr-" + 256 bits in base64url
  EXPECT_EQ(a.rfind("kr-", 0), 0u);
  EXPECT_EQ(keyFormatProblem(a), "");
}

TEST(KeyStore, FindsTheTenantByBearerOrXApiKey) {
  const auto keys = configuredKeys();
  KeyStore store(keys);
  AuthResult r = store.authenticate(bearer(kPlannerKey));
  ASSERT_EQ(r.status, AuthStatus::kOk);
  EXPECT_EQ(r.tenant->name, "planner");

  Headers h;
  h.add("x-api-key", kWorkerKey);
  r = store.authenticate(h);
  ASSERT_EQ(r.status, AuthStatus::kOk);
  EXPECT_EQ(r.tenant->name, "worker");

  // The scheme is case-insensitive.
  Headers mixed;
  mixed.add("Authorization", "bEaReR " + std::string(kWorkerKey));
  EXPECT_EQ(store.authenticate(mixed).status, AuthStatus::kOk);
  // The key in both headers is refused even when it is the same key: send it once.
  h.add("Authorization", "Bearer " + std::string(kWorkerKey));
  AuthResult twice = store.authenticate(h);
  EXPECT_EQ(twice.status, AuthStatus::kConflict);
  EXPECT_NE(twice.message.find("once"), std::string::npos);
}

TEST(KeyStore, EveryWrongKeyGetsItsOwnAnswerAndNoneEchoesTheKey) {
  const auto keys = configuredKeys();
  KeyStore store(keys);

  EXPECT_EQ(store.authenticate(Headers()).status, AuthStatus::kMissing);
  EXPECT_EQ(store.authenticate(bearer("kr-not-a-key-we-issued")).status, AuthStatus::kInvalid);

  Headers both = bearer(kPlannerKey);
  both.add("x-api-key", kWorkerKey);
  AuthResult conflict = store.authenticate(both);
  EXPECT_EQ(conflict.status, AuthStatus::kConflict);

  Headers basic;
  basic.add("authorization", "Basic dXNlcjpwYXNz");
  EXPECT_EQ(store.authenticate(basic).status, AuthStatus::kMalformed);

  struct Case {
    std::string key;
    std::string says;
  };
  const std::vector<Case> cases = {
      {std::string(kPlannerKey) + "\xE2\x80\x8B", "zero-width space"},
      {"\xEF\xBB\xBF" + std::string(kPlannerKey), "byte order mark"},
      {" " + std::string(kPlannerKey), "whitespace"},
      {std::string(kPlannerKey) + "\xC2\xA0", "non-breaking space"},
  };
  for (const Case& c : cases) {
    AuthResult r = store.authenticate(bearer(c.key));
    EXPECT_EQ(r.status, AuthStatus::kMalformed) << c.says;
    EXPECT_NE(r.message.find(c.says), std::string::npos) << r.message;
    EXPECT_EQ(r.message.find("kr-planner"), std::string::npos) << "the key must not be echoed";
  }
}

TEST(KeyStore, AllowListsApplyPerTenant) {
  const auto keys = configuredKeys();
  KeyStore store(keys);
  const Tenant* planner = store.find(kPlannerKey);
  const Tenant* worker = store.find(kWorkerKey);
  ASSERT_TRUE(planner && worker);
  EXPECT_TRUE(planner->mayUse("kimi-k2"));
  EXPECT_FALSE(planner->mayUse("kimi-agent-swarm"));
  EXPECT_TRUE(worker->mayUse("anything"));  // no allow-list: every model
}

TEST(KeyStore, AnInvalidDigestInTheConfigIsRefusedAtBuild) {
  std::vector<config::Key> keys = configuredKeys();
  keys[0].sha256 = "not-hex";
  EXPECT_THROW(KeyStore{keys}, std::invalid_argument);
}

}  // namespace
}  // namespace relay::admission
