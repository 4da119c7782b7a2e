#include "relay/cluster/resp.hpp"

#include <charconv>

namespace relay::cluster {

std::int64_t RespValue::asInteger(std::int64_t fallback) const {
  if (type == Type::kInteger) return integer;
  if (type == Type::kBulk || type == Type::kSimple) {
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size()) return v;
  }
  return fallback;
}

namespace {

void appendArg(std::string& out, std::string_view arg) {
  out += '$';
  out += std::to_string(arg.size());
  out += "\r\n";
  out += arg;
  out += "\r\n";
}

class Reader {
 public:
  Reader(std::string_view in, const RespLimits& limits) : in_(in), limits_(limits) {}

  RespStatus value(RespValue& out, unsigned depth) {
    if (pos_ >= in_.size()) return RespStatus::kNeedMore;
    const char kind = in_[pos_++];
    std::string_view line;
    if (RespStatus s = readLine(line); s != RespStatus::kOk) return s;
    switch (kind) {
      case '+':
        out.type = RespValue::Type::kSimple;
        out.text = line;
        return RespStatus::kOk;
      case '-':
        out.type = RespValue::Type::kError;
        out.text = line;
        return RespStatus::kOk;
      case ':':
        out.type = RespValue::Type::kInteger;
        return number(line, out.integer) ? RespStatus::kOk : bad("malformed integer reply");
      case '$': {
        std::int64_t n = 0;
        if (!number(line, n) || n < -1) return bad("malformed bulk length");
        if (n == -1) {
          out.type = RespValue::Type::kNull;
          return RespStatus::kOk;
        }
        if (static_cast<std::uint64_t>(n) > limits_.maxBulkBytes)
          return bad("bulk string larger than " + std::to_string(limits_.maxBulkBytes) + " bytes");
        const auto len = static_cast<std::size_t>(n);
        if (in_.size() - pos_ < len + 2) return RespStatus::kNeedMore;
        if (in_[pos_ + len] != '\r' || in_[pos_ + len + 1] != '\n')
          return bad("bulk string not followed by CRLF");
        out.type = RespValue::Type::kBulk;
        out.text = in_.substr(pos_, len);
        pos_ += len + 2;
        return RespStatus::kOk;
      }
      case '*': {
        std::int64_t n = 0;
        if (!number(line, n) || n < -1) return bad("malformed array length");
        if (n == -1) {
          out.type = RespValue::Type::kNull;
          return RespStatus::kOk;
        }
        if (depth >= limits_.maxDepth) return bad("arrays nested too deeply");
        elements_ += static_cast<std::uint64_t>(n);
        if (elements_ > limits_.maxElements)
          return bad("reply with more than " + std::to_string(limits_.maxElements) + " elements");
        out.type = RespValue::Type::kArray;
        out.items.clear();
        out.items.resize(static_cast<std::size_t>(n));
        for (RespValue& item : out.items) {
          if (RespStatus s = value(item, depth + 1); s != RespStatus::kOk) return s;
        }
        return RespStatus::kOk;
      }
      default:
        return bad("unknown reply type byte");
    }
  }

  std::size_t position() const { return pos_; }
  std::string error;

 private:
  RespStatus readLine(std::string_view& line) {
    const std::size_t end = in_.find("\r\n", pos_);
    if (end == std::string_view::npos) {
      if (in_.size() - pos_ > limits_.maxLineBytes) return bad("reply line too long");
      return RespStatus::kNeedMore;
    }
    if (end - pos_ > limits_.maxLineBytes) return bad("reply line too long");
    line = in_.substr(pos_, end - pos_);
    pos_ = end + 2;
    return RespStatus::kOk;
  }

  static bool number(std::string_view text, std::int64_t& v) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    return ec == std::errc() && end == text.data() + text.size() && !text.empty();
  }

  RespStatus bad(std::string why) {
    error = std::move(why);
    return RespStatus::kBad;
  }

  std::string_view in_;
  const RespLimits& limits_;
  std::size_t pos_ = 0;
  std::uint64_t elements_ = 0;
};

}  // namespace

void appendCommand(std::string& out, std::initializer_list<std::string_view> args) {
  out += '*';
  out += std::to_string(args.size());
  out += "\r\n";
  for (std::string_view a : args)
    appendArg(out, a);
}

void appendCommand(std::string& out, const std::vector<std::string>& args) {
  out += '*';
  out += std::to_string(args.size());
  out += "\r\n";
  for (const std::string& a : args)
    appendArg(out, a);
}

RespStatus parseReply(std::string_view in, RespValue& out, std::size_t& consumed,
                      std::string& error, const RespLimits& limits) {
  Reader reader(in, limits);
  RespStatus s = reader.value(out, 0);
  if (s == RespStatus::kOk) consumed = reader.position();
  if (s == RespStatus::kBad) error = std::move(reader.error);
  return s;
}

}  // namespace relay::cluster
