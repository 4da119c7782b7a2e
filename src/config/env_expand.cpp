#include "env_expand.hpp"

#include <cstdlib>

namespace relay::config {

EnvLookup processEnvironment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const std::string key(name);
    const char* value = std::getenv(key.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

namespace detail {

namespace {

bool isNameStart(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
bool isNameChar(char c) {
  return isNameStart(c) || (c >= '0' && c <= '9');
}

bool isValidName(std::string_view name) {
  if (name.empty() || !isNameStart(name.front())) return false;
  for (char c : name) {
    if (!isNameChar(c)) return false;
  }
  return true;
}

}  // namespace

Expansion expandEnv(std::string_view raw, const EnvLookup& env) {
  Expansion out;
  out.text.reserve(raw.size());
  std::size_t i = 0;
  while (i < raw.size()) {
    const char c = raw[i];
    if (c != '$' || i + 1 == raw.size()) {
      out.text += c;
      ++i;
      continue;
    }
    if (raw[i + 1] == '$') {  // "$$" -> "$"
      out.text += '$';
      i += 2;
      continue;
    }
    if (raw[i + 1] != '{') {  // a lone '$' stays as written
      out.text += c;
      ++i;
      continue;
    }
    const std::size_t close = raw.find('}', i + 2);
    if (close == std::string_view::npos) {
      out.error = "unterminated '${' (write '$$' for a literal '$')";
      return out;
    }
    std::string_view body = raw.substr(i + 2, close - i - 2);
    std::optional<std::string_view> fallback;
    if (const std::size_t sep = body.find(":-"); sep != std::string_view::npos) {
      fallback = body.substr(sep + 2);
      body = body.substr(0, sep);
    }
    if (!isValidName(body)) {
      out.error =
          "malformed '${...}': a variable name is letters, digits and '_' (write '$$' for a "
          "literal '$')";
      return out;
    }
    std::optional<std::string> value = env(body);
    if (!value || value->empty()) {
      if (!fallback) {
        out.error = "environment variable '" + std::string(body) + "' is " +
                    (value ? "empty (write '${" + std::string(body) + ":-}' to allow that)"
                           : std::string("not set"));
        return out;
      }
      value = std::string(*fallback);
    }
    out.text += *value;
    out.substituted = true;
    i = close + 1;
  }
  return out;
}

}  // namespace detail
}  // namespace relay::config
