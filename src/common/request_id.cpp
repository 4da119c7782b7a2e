#include "relay/common/request_id.hpp"

#include <cstring>
#include <random>

#include "relay/common/hex.hpp"

namespace relay {

namespace {
constexpr std::size_t kNewIdSize = 4 + 24;

void writeNewRequestId(char* out) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::memcpy(out, "req_", 4);
  char* at = writeHexWord(out + 4, random());
  writeHexWord(at, random(), 8);
}
}  // namespace

std::string newRequestId() {
  std::string id(kNewIdSize, '0');
  writeNewRequestId(id.data());
  return id;
}

RequestId requestIdFrom(std::string_view given) {
  static_assert(RequestId::capacity() == 128);
  bool ok = !given.empty() && given.size() <= RequestId::capacity();
  for (char c : given)
    ok = ok && c > 0x20 && c < 0x7f;
  RequestId id;
  if (ok) {
    id.assign(given);
  } else {
    writeNewRequestId(id.resize(kNewIdSize));
  }
  return id;
}

}  // namespace relay
