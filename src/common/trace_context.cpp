#include "relay/common/trace_context.hpp"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "relay/common/hex.hpp"

namespace relay {
namespace {

constexpr std::size_t kTraceparentV0Size = 55;  // 2 + 1 + 32 + 1 + 16 + 1 + 2
constexpr std::size_t kMaxMembers = 32;
constexpr std::size_t kMaxTracestate = 512;
constexpr std::size_t kLongMember = 128;

bool lowerHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool allLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), lowerHex);
}

bool allZero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == '0'; });
}

int hexValue(char c) {
  return c <= '9' ? c - '0' : c - 'a' + 10;
}

bool lcalpha(char c) {
  return c >= 'a' && c <= 'z';
}
bool keyChar(char c) {
  return lcalpha(c) || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' || c == '/';
}

bool validKey(std::string_view key) {
  std::size_t at = key.find('@');
  if (at == std::string_view::npos) {
    return !key.empty() && key.size() <= 256 && lcalpha(key[0]) &&
           std::all_of(key.begin(), key.end(), keyChar);
  }
  std::string_view tenant = key.substr(0, at);
  std::string_view system = key.substr(at + 1);
  bool tenantOk = !tenant.empty() && tenant.size() <= 241 &&
                  (lcalpha(tenant[0]) || (tenant[0] >= '0' && tenant[0] <= '9')) &&
                  std::all_of(tenant.begin(), tenant.end(), keyChar);
  bool systemOk = !system.empty() && system.size() <= 14 && lcalpha(system[0]) &&
                  std::all_of(system.begin(), system.end(), keyChar);
  return tenantOk && systemOk;
}

bool validValue(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u > 0x7e || c == ',' || c == '=') return false;
  }
  return true;
}

std::string_view trimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// Seeded with 256 bits from the system: one 32-bit seed per thread would
// give every gateway thread one of 2^32 id sequences, and two replicas (or
// two threads) on the same sequence would hand out the same trace ids.
std::mt19937_64 seededGenerator() {
  std::random_device device;
  std::seed_seq seed{device(), device(), device(), device(),
                     device(), device(), device(), device()};
  return std::mt19937_64(seed);
}

// `words` random 64-bit words as 16 hex digits each into out[0, 16 * words),
// never all zeros (the spec's "invalid" id).
void randomHex(char* out, std::size_t words) {
  thread_local std::mt19937_64 random = seededGenerator();
  bool zero = true;
  while (zero) {
    char* at = out;
    for (std::size_t i = 0; i < words; ++i) {
      const std::uint64_t bits = random();
      zero = zero && bits == 0;
      at = writeHexWord(at, bits);
    }
  }
}

}  // namespace

std::optional<Traceparent> parseTraceparent(std::string_view v) {
  if (v.size() < kTraceparentV0Size) return std::nullopt;
  std::string_view version = v.substr(0, 2);
  if (!allLowerHex(version) || version == "ff") return std::nullopt;
  if (version == "00" && v.size() != kTraceparentV0Size) return std::nullopt;
  // A later version: its first four fields read as version 00's, and what
  // follows must start a new field.
  if (v.size() > kTraceparentV0Size && v[kTraceparentV0Size] != '-') return std::nullopt;
  if (v[2] != '-' || v[35] != '-' || v[52] != '-') return std::nullopt;
  std::string_view traceId = v.substr(3, 32);
  std::string_view parentId = v.substr(36, 16);
  std::string_view flags = v.substr(53, 2);
  if (!allLowerHex(traceId) || !allLowerHex(parentId) || !allLowerHex(flags)) return std::nullopt;
  if (allZero(traceId) || allZero(parentId)) return std::nullopt;
  Traceparent out;
  out.traceId = traceId;
  out.parentId = parentId;
  out.flags = static_cast<std::uint8_t>(hexValue(flags[0]) * 16 + hexValue(flags[1]));
  return out;
}

std::optional<std::string> normaliseTracestate(std::string_view value) {
  std::vector<std::string_view> members;
  std::vector<std::string_view> keys;
  while (true) {
    std::size_t comma = value.find(',');
    std::string_view member = trimOws(value.substr(0, comma));
    if (!member.empty()) {
      std::size_t eq = member.find('=');
      if (eq == std::string_view::npos) return std::nullopt;
      std::string_view key = member.substr(0, eq);
      if (!validKey(key) || !validValue(member.substr(eq + 1))) return std::nullopt;
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) return std::nullopt;
      if (members.size() == kMaxMembers) return std::nullopt;
      keys.push_back(key);
      members.push_back(member);
    }
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  auto joinedSize = [](const std::vector<std::string_view>& list) {
    std::size_t n = list.empty() ? 0 : list.size() - 1;
    for (std::string_view m : list)
      n += m.size();
    return n;
  };
  // Too long to pass on whole: the spec's order of truncation.
  if (joinedSize(members) > kMaxTracestate) {
    std::erase_if(members, [](std::string_view m) { return m.size() > kLongMember; });
    while (joinedSize(members) > kMaxTracestate)
      members.pop_back();
  }
  std::string out;
  for (std::string_view m : members) {
    if (!out.empty()) out += ',';
    out += m;
  }
  return out;
}

std::string newTraceId() {
  std::string id(32, '0');
  randomHex(id.data(), 2);
  return id;
}

std::string newSpanId() {
  std::string id(16, '0');
  randomHex(id.data(), 1);
  return id;
}

InlineString<55> TraceContext::traceparent() const {
  InlineString<55> out;
  char* at = out.resize(3 + traceId.size() + 1 + spanId.size() + 3);
  std::memset(at, '-', out.size());
  *at++ = '0';
  *at++ = '0';
  ++at;  // '-'
  at = std::copy_n(traceId.data(), traceId.size(), at);
  ++at;
  at = std::copy_n(spanId.data(), spanId.size(), at);
  ++at;
  writeHexWord(at, flags, 2);
  return out;
}

TraceContext traceFrom(const Headers& headers) {
  std::string_view parent;
  std::size_t parents = 0;
  std::string state;
  bool stateSeen = false;
  for (const HeaderField& f : headers) {
    if (f.name == "traceparent") {
      parent = f.value;
      ++parents;
    } else if (f.name == "tracestate") {
      if (stateSeen) state += ',';
      state += f.value;
      stateSeen = true;
    }
  }
  TraceContext t;
  randomHex(t.spanId.resize(16), 1);
  std::optional<Traceparent> given;
  if (parents == 1) given = parseTraceparent(trimOws(parent));
  if (!given) {
    randomHex(t.traceId.resize(32), 2);
    return t;  // a new trace: the caller's tracestate belongs to no trace we continue
  }
  t.traceId = given->traceId;
  t.parentId = given->parentId;
  // Version 00 defines the sampled bit only; other bits are not passed on.
  t.flags = given->flags & 0x01;
  if (stateSeen) t.tracestate = normaliseTracestate(state).value_or(std::string());
  return t;
}

}  // namespace relay
