// RESP2, the Redis wire format: commands out (arrays of bulk strings) and
// replies in. Our own small codec rather than Debian's hiredis 0.14: that
// version has neither TLS nor deadlines, so it could serve only as this
// parser while Asio does the I/O anyway, and a reply from a misbehaving or
// hostile server must meet our bounds (bulk size, element count, depth)
// before anything is allocated for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace relay::cluster {

struct RespValue {
  enum class Type { kSimple, kError, kInteger, kBulk, kNull, kArray };
  Type type = Type::kNull;
  std::string text;  // simple string, error or bulk string
  std::int64_t integer = 0;
  std::vector<RespValue> items;  // array

  bool isError() const { return type == Type::kError; }
  // An integer reply, or a bulk/simple string holding one; `fallback` otherwise.
  std::int64_t asInteger(std::int64_t fallback = 0) const;
};

// Appends one command: *N\r\n then $len\r\narg\r\n per argument.
void appendCommand(std::string& out, std::initializer_list<std::string_view> args);
void appendCommand(std::string& out, const std::vector<std::string>& args);

struct RespLimits {
  std::size_t maxBulkBytes = 1 << 20;  // one bulk string
  std::size_t maxElements = 4096;      // one array (and in total per reply)
  unsigned maxDepth = 4;               // nested arrays
  std::size_t maxLineBytes = 4096;     // a simple string, error or length line
};

enum class RespStatus { kOk, kNeedMore, kBad };

// Parses one reply from the front of `in`. kOk: `out` is the reply and
// `consumed` its length. kNeedMore: `in` holds a prefix of a reply. kBad: the
// bytes are not RESP or break a limit (`error` says which); the connection
// must be closed.
RespStatus parseReply(std::string_view in, RespValue& out, std::size_t& consumed,
                      std::string& error, const RespLimits& limits = {});

}  // namespace relay::cluster
