// Callers' keys: issued by the gateway, stored as SHA-256 digests only, and
// matched in constant time. Immutable once built (a reload builds a new one).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "relay/common/headers.hpp"
#include "relay/config/config.hpp"

namespace relay::admission {

using Digest = std::array<std::uint8_t, 32>;

Digest sha256(std::string_view data);
std::string toHex(const Digest& digest);
// Parses 64 hex digits (either case). False on anything else.
bool fromHex(std::string_view hex, Digest& out);

// A new random key ("kr-" + 43 base64url characters = 256 bits).
std::string generateKey();

// One caller, as the rest of the pipeline knows it (never the key itself).
struct Tenant {
  std::size_t index = 0;  // position in the config's keys list
  std::string name;
  const config::Key* config = nullptr;
  bool mayUse(std::string_view model) const;
  bool mayUseMcpServer(std::string_view server) const;
};

enum class AuthStatus { kOk, kMissing, kInvalid, kMalformed, kConflict };

struct AuthResult {
  AuthStatus status = AuthStatus::kMissing;
  const Tenant* tenant = nullptr;  // set when kOk
  std::string message;             // for the caller; never contains the key
};

class KeyStore {
 public:
  // `keys` must outlive the store (it lives in the same config snapshot).
  explicit KeyStore(const std::vector<config::Key>& keys);

  // Reads `Authorization: Bearer <key>` or `x-api-key: <key>` (both present
  // with different values is a conflict) and finds the tenant.
  AuthResult authenticate(const Headers& headers) const;

  // Looks a presented key up. Exposed for tests and the MCP relay. A
  // rotated key's previous secret matches until its grace period ends.
  const Tenant* find(std::string_view presentedKey) const;

  const std::vector<Tenant>& tenants() const { return tenants_; }

 private:
  struct DigestHash {
    std::size_t operator()(const Digest& d) const;
  };
  struct Entry {
    Digest digest;
    std::size_t tenant = 0;
    std::int64_t untilUnix = 0;  // 0: no expiry (the current secret); else a rotated one's grace
  };
  void addDigest(const std::string& hex, std::size_t tenant, std::int64_t untilUnix);

  std::vector<Tenant> tenants_;
  std::vector<Entry> digests_;
  std::unordered_map<Digest, std::size_t, DigestHash> byDigest_;  // -> index in digests_
  // Distinguishes this store from every other (its worker caches of
  // authenticated keys are keyed by it).
  std::uint64_t id_ = nextId();
  static std::uint64_t nextId();
};

// Why a presented key cannot be right as typed: surrounding whitespace, or
// invisible characters a copy-paste brings along. "" when it looks clean.
std::string keyFormatProblem(std::string_view key);

}  // namespace relay::admission
