#include "relay/common/request_id.hpp"

#include <cstdio>
#include <random>

namespace relay {

std::string newRequestId() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  char buf[32];
  std::uint64_t a = random();
  auto b = static_cast<std::uint32_t>(random());
  std::snprintf(buf, sizeof buf, "req_%016llx%08x", static_cast<unsigned long long>(a), b);
  return buf;
}

std::string requestIdFrom(std::string_view given) {
  bool ok = !given.empty() && given.size() <= 128;
  for (char c : given) ok = ok && c > 0x20 && c < 0x7f;
  return ok ? std::string(given) : newRequestId();
}

}  // namespace relay
