#include "relay/common/request_id.hpp"

#include <random>

namespace relay {

std::string newRequestId() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "req_";
  id.resize(4 + 24);
  std::uint64_t a = random();
  std::uint64_t b = random();
  for (int i = 0; i < 16; ++i)
    id[4 + i] = kHex[(a >> (60 - 4 * i)) & 0xf];
  for (int i = 0; i < 8; ++i)
    id[20 + i] = kHex[(b >> (28 - 4 * i)) & 0xf];
  return id;
}

std::string requestIdFrom(std::string_view given) {
  bool ok = !given.empty() && given.size() <= 128;
  for (char c : given)
    ok = ok && c > 0x20 && c < 0x7f;
  return ok ? std::string(given) : newRequestId();
}

}  // namespace relay
