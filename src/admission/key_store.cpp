#include "relay/admission/key_store.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "relay/common/base64url.hpp"
#include "relay/common/hex.hpp"
#include "relay/common/siphash.hpp"

namespace relay::admission {

Digest sha256(std::string_view data) {
  // One context and one fetched algorithm per thread: EVP_Digest() would
  // allocate and fetch both on every call, and every request hashes a key.
  struct Hasher {
    EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~Hasher() {
      EVP_MD_CTX_free(ctx);
      EVP_MD_free(md);
    }
  };
  thread_local Hasher h;
  Digest d{};
  unsigned int len = 0;
  if (!h.md || !h.ctx || EVP_DigestInit_ex2(h.ctx, h.md, nullptr) != 1 ||
      EVP_DigestUpdate(h.ctx, data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(h.ctx, d.data(), &len) != 1) {
    EVP_Digest(data.data(), data.size(), d.data(), &len, EVP_sha256(), nullptr);
  }
  return d;
}

std::string toHex(const Digest& digest) {
  return toHexString(digest.data(), digest.size());
}

bool fromHex(std::string_view hex, Digest& out) {
  if (hex.size() != 64) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < 32; ++i) {
    int hi = nibble(hex[2 * i]);
    int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return true;
}

std::string generateKey() {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1)
    throw std::runtime_error("no randomness available for a new key");
  // base64url without padding: 32 bytes -> 43 characters.
  return "kr-" + base64UrlEncode(
                     std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

bool Tenant::mayUse(std::string_view model) const {
  const auto& allowed = config->models;
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), model) != allowed.end();
}

bool Tenant::mayUseMcpServer(std::string_view server) const {
  const auto& allowed = config->mcpServers;
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), server) != allowed.end();
}

std::size_t KeyStore::DigestHash::operator()(const Digest& d) const {
  std::size_t h;
  std::memcpy(&h, d.data(), sizeof h);  // a digest is already uniformly distributed
  return h;
}

KeyStore::KeyStore(const std::vector<config::Key>& keys) {
  tenants_.reserve(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    tenants_.push_back(Tenant{i, keys[i].name, &keys[i]});
    addDigest(keys[i].sha256, i, 0);
    for (const config::PreviousDigest& p : keys[i].previousDigests)
      addDigest(p.sha256, i, p.untilUnix);
  }
}

void KeyStore::addDigest(const std::string& hex, std::size_t tenant, std::int64_t untilUnix) {
  Digest d{};
  if (!fromHex(hex, d))
    throw std::invalid_argument("key '" + tenants_[tenant].name + "' has an invalid sha256 digest");
  if (byDigest_.count(d) != 0) return;  // the config refuses duplicates; keep the first
  byDigest_.emplace(d, digests_.size());
  digests_.push_back(Entry{d, tenant, untilUnix});
}

namespace {

struct SipKeys {
  std::uint64_t k[2];  // one 128-bit SipHash key
  SipKeys() {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(k), sizeof k) != 1)
      throw std::runtime_error("no randomness for the key cache");
  }
};

const SipKeys& sipKeys() {
  static const SipKeys keys;
  return keys;
}

// The keys one worker thread authenticated lately: a keyed 128-bit hash of
// the presented key (never the key itself) -> its digest entry. Tied to one
// KeyStore: a new config snapshot starts with an empty cache. Bounded: when
// full it is cleared. Refused keys are never cached, so a caller cannot fill
// it; each costs the full SHA-256 lookup.
struct AuthCache {
  static constexpr std::size_t kMaxEntries = 4096;
  struct Hash128 {
    std::uint64_t a, b;
    bool operator==(const Hash128&) const = default;
  };
  struct HashOfHash {
    std::size_t operator()(const Hash128& h) const { return static_cast<std::size_t>(h.a); }
  };
  std::uint64_t owner = 0;  // KeyStore::id_ (never reused, unlike an address)
  std::unordered_map<Hash128, std::size_t, HashOfHash> entries;
};

}  // namespace

std::uint64_t KeyStore::nextId() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

const Tenant* KeyStore::find(std::string_view presentedKey) const {
  thread_local AuthCache cache;
  if (cache.owner != id_) {
    cache.entries.clear();
    cache.owner = id_;
  }
  // A keyed 128-bit hash (one pass of SipHash-2-4-128): a cache hit stands
  // for the key itself, so 64 bits would leave collisions within reach.
  const SipKeys& keys = sipKeys();
  const std::array<std::uint64_t, 2> wide = siphash24x128(keys.k[0], keys.k[1], presentedKey);
  const AuthCache::Hash128 h{wide[0], wide[1]};
  std::size_t index = 0;
  if (auto hit = cache.entries.find(h); hit != cache.entries.end()) {
    index = hit->second;
  } else {
    // The lookup hashes a digest of the key, so its timing says nothing about
    // the key; the final comparison is constant-time all the same.
    Digest d = sha256(presentedKey);
    auto it = byDigest_.find(d);
    if (it == byDigest_.end()) return nullptr;
    if (CRYPTO_memcmp(d.data(), digests_[it->second].digest.data(), d.size()) != 0) return nullptr;
    index = it->second;
    if (cache.entries.size() >= AuthCache::kMaxEntries) cache.entries.clear();
    cache.entries.emplace(h, index);
  }
  const Entry& e = digests_[index];
  if (e.untilUnix != 0 && std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                                  .count() >= e.untilUnix)
    return nullptr;  // a rotated secret whose grace period is over
  return &tenants_[e.tenant];
}

namespace {

struct Invisible {
  std::string_view bytes;
  const char* name;
};

constexpr Invisible kInvisible[] = {
    {"\xE2\x80\x8B", "a zero-width space (U+200B)"},
    {"\xE2\x80\x8C", "a zero-width non-joiner (U+200C)"},
    {"\xE2\x80\x8D", "a zero-width joiner (U+200D)"},
    {"\xE2\x81\xA0", "a word joiner (U+2060)"},
    {"\xEF\xBB\xBF", "a byte order mark (U+FEFF)"},
    {"\xC2\xA0", "a non-breaking space (U+00A0)"},
    {"\xC2\xAD", "a soft hyphen (U+00AD)"},
};

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

}  // namespace

std::string keyFormatProblem(std::string_view key) {
  if (!key.empty() && (isSpace(key.front()) || isSpace(key.back())))
    return "the API key has leading or trailing whitespace; remove it";
  for (const Invisible& inv : kInvisible) {
    if (key.find(inv.bytes) != std::string_view::npos)
      return std::string("the API key contains ") + inv.name +
             ", an invisible character (often from copy and paste); remove it";
  }
  for (char c : key) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return "the API key contains a control character; remove it";
    if (isSpace(c)) return "the API key contains whitespace; remove it";
  }
  return {};
}

AuthResult KeyStore::authenticate(const Headers& headers) const {
  AuthResult r;
  std::string_view bearer;
  bool hasBearer = false;
  if (const std::optional<std::string_view> auth = headers.find("authorization")) {
    std::string_view v = *auth;
    // Scheme is case-insensitive (RFC 9110 §11.1); the token is everything after one space.
    if (v.size() >= 7 && equalsIgnoreCase(v.substr(0, 7), "bearer ")) {
      bearer = v.substr(7);
      hasBearer = true;
    } else {
      r.status = AuthStatus::kMalformed;
      r.message =
          "the Authorization header must be 'Bearer <key>'; use the key the gateway issued you";
      return r;
    }
  }
  const std::optional<std::string_view> apiKey = headers.find("x-api-key");
  // Two credentials are refused whether or not they match: which one a
  // gateway (or the next proxy) would honour is exactly what must not be guessed.
  if (hasBearer && apiKey) {
    r.status = AuthStatus::kConflict;
    r.message =
        "the key was sent twice, in Authorization and in x-api-key; send it once, in one of them";
    return r;
  }
  std::string_view key = hasBearer ? bearer
                         : apiKey  ? std::string_view(*apiKey)
                                   : std::string_view();
  if (!hasBearer && !apiKey) {
    r.status = AuthStatus::kMissing;
    r.message =
        "You didn't provide an API key. Send it as 'Authorization: Bearer <key>' or 'x-api-key: "
        "<key>'.";
    return r;
  }
  if (key.empty()) {
    r.status = AuthStatus::kMissing;
    r.message = "The API key is empty. Send the key the gateway issued you.";
    return r;
  }
  r.tenant = find(key);
  // Why a key did not match is worth a scan only when it did not.
  if (!r.tenant) {
    if (std::string problem = keyFormatProblem(key); !problem.empty()) {
      r.status = AuthStatus::kMalformed;
      r.message = "Incorrect API key provided: " + problem + ".";
      return r;
    }
    r.status = AuthStatus::kInvalid;
    r.message = "Incorrect API key provided. Use a key issued by this gateway.";
    return r;
  }
  r.status = AuthStatus::kOk;
  return r;
}

}  // namespace relay::admission
