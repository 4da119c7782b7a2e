#include "relay/common/request_id.hpp"

#include <random>

#include "relay/common/hex.hpp"

namespace relay {

std::string newRequestId() {
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::string id = "req_";
  id.resize(4 + 24);
  char* at = writeHexWord(id.data() + 4, random());
  writeHexWord(at, random(), 8);
  return id;
}

std::string requestIdFrom(std::string_view given) {
  bool ok = !given.empty() && given.size() <= 128;
  for (char c : given)
    ok = ok && c > 0x20 && c < 0x7f;
  return ok ? std::string(given) : newRequestId();
}

}  // namespace relay
