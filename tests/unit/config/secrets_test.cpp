// Secrets (api_key, session_secret, and anything taken from the environment)
// never appear in an error message; the message names the key only.
#include <gtest/gtest.h>

#include "config_test_support.hpp"
#include "relay/config/parse.hpp"

namespace relay::config {
namespace {

using testing::errorOf;
using testing::fakeEnv;
using testing::withMinimal;

constexpr std::string_view kSecret = "sk-Sup3rSecret-0123456789";

std::string upstreamWith(std::string_view lines) {
  return "server:\n  listen: [\"127.0.0.1:0\"]\nupstreams:\n  - name: u\n" + std::string(lines);
}

void expectNoSecret(const std::string& message) {
  EXPECT_NE(message, "<parsed>");
  EXPECT_EQ(message.find("Sup3rSecret"), std::string::npos) << message;
}

TEST(ConfigSecrets, ApiKeyOfTheWrongShapeIsNotQuoted) {
  const std::string yaml = upstreamWith(
      "    base_url: https://h/v1\n    models: [m]\n"
      "    api_key: [" +
      std::string(kSecret) + "]\n");
  const std::string message = errorOf(yaml);
  EXPECT_EQ(message, "relay.yaml:7:14: upstreams[0].api_key: must be a string, not a list");
  expectNoSecret(message);
}

TEST(ConfigSecrets, ASecretWithATrailingNewlineIsRefusedWithoutQuotingIt) {
  // A key mounted from a file often ends in a newline; in a header line it
  // would split the upstream request.
  const std::string yaml =
      upstreamWith("    base_url: https://h/v1\n    models: [m]\n    api_key: ${UPSTREAM_KEY}\n");
  const std::string message =
      errorOf(yaml, fakeEnv({{"UPSTREAM_KEY", std::string(kSecret) + "\n"}}));
  EXPECT_NE(message.find("upstreams[0].api_key: contains a line break"), std::string::npos)
      << message;
  expectNoSecret(message);
}

TEST(ConfigSecrets, MalformedReferenceInASecretIsNotQuoted) {
  const std::string yaml = upstreamWith(
      "    base_url: https://h/v1\n    models: [m]\n"
      "    api_key: \"" +
      std::string(kSecret) + "${\"\n");
  const std::string message = errorOf(yaml);
  EXPECT_EQ(message,
            "relay.yaml:7:14: upstreams[0].api_key: unterminated '${' (write '$$' for a literal "
            "'$')");
  expectNoSecret(message);
}

TEST(ConfigSecrets, ShortSessionSecretIsNotQuoted) {
  const std::string message =
      errorOf(withMinimal("mcp:\n  session_secret: ${S}\n"), fakeEnv({{"S", "Sup3rSecret"}}));
  EXPECT_EQ(message,
            "relay.yaml:8:19: mcp.session_secret: must be at least 32 characters long (the value "
            "is not shown)");
  expectNoSecret(message);
  // Written inline rather than through the environment: still not quoted.
  expectNoSecret(errorOf(withMinimal("mcp:\n  session_secret: Sup3rSecret\n")));
}

TEST(ConfigSecrets, RawKeyPastedAsDigestIsNotQuoted) {
  const std::string message =
      errorOf(withMinimal("keys:\n  - name: a\n    sha256: " + std::string(kSecret) + "\n"));
  EXPECT_EQ(message,
            "relay.yaml:9:13: keys[0].sha256: must be a SHA-256 digest: 64 hexadecimal characters "
            "(got 25 characters; store the digest of the key, never the key itself)");
  expectNoSecret(message);
  expectNoSecret(errorOf(withMinimal("admin:\n  key_sha256: " + std::string(kSecret) + "\n")));
}

TEST(ConfigSecrets, CredentialsInABaseUrlAreNotQuoted) {
  const std::string message = errorOf(
      upstreamWith("    base_url: https://user:Sup3rSecret@api.example.com/v1\n    models: [m]\n"));
  EXPECT_EQ(
      message,
      "relay.yaml:5:15: upstreams[0].base_url: must not contain credentials (user:password@); "
      "put the secret in api_key");
  expectNoSecret(message);
  expectNoSecret(
      errorOf(withMinimal("mcp:\n  servers: [{name: a, url: \"https://u:Sup3rSecret@h/mcp\"}]\n")));
}

TEST(ConfigSecrets, SecretFromTheEnvironmentInTheWrongFieldIsNotQuoted) {
  const EnvLookup env = fakeEnv({{"MOONSHOT_API_KEY", std::string(kSecret)}});
  expectNoSecret(errorOf(upstreamWith("    base_url: https://h/v1\n    models: [m]\n"
                                      "    weight: ${MOONSHOT_API_KEY}\n"),
                         env));
  expectNoSecret(errorOf(withMinimal("log: {level: \"${MOONSHOT_API_KEY}\"}\n"), env));
  // Its own server section (withMinimal's would make this a duplicate-key error).
  const std::string listen = errorOf(
      "server: {listen: [\"${MOONSHOT_API_KEY}\"]}\n"
      "upstreams: [{name: u, base_url: \"https://h/v1\", models: [m]}]\n",
      env);
  EXPECT_NE(listen.find("server.listen[0]"), std::string::npos) << listen;
  expectNoSecret(listen);
}

TEST(ConfigSecrets, ParsedSecretsKeepTheirValue) {
  const std::string yaml = upstreamWith(
                               "    base_url: https://h/v1\n    models: [m]\n"
                               "    api_key: ${K}\n") +
                           "mcp:\n  session_secret: ${S}\n";
  const Config c = parseConfig(
      yaml, "a.yaml",
      fakeEnv({{"K", std::string(kSecret)}, {"S", "0123456789abcdef0123456789abcdef"}}));
  EXPECT_EQ(c.upstreams[0].apiKey, kSecret);
  EXPECT_EQ(c.mcp.sessionSecret, "0123456789abcdef0123456789abcdef");
}

}  // namespace
}  // namespace relay::config
