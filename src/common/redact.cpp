#include "relay/common/redact.hpp"

#include <cctype>

namespace relay {
namespace {

constexpr std::string_view kMask = "[redacted]";

bool keyChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '*' || c == '.' || c == '_' ||
         c == '-';
}

bool startsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

// Length of a key-shaped token starting at `text[i]`, or 0.
std::size_t keyTokenAt(std::string_view text, std::size_t i) {
  if (i > 0 && keyChar(text[i - 1])) return 0;  // inside a longer word
  std::string_view rest = text.substr(i);
  std::size_t skip = 0;
  if (startsWithIgnoreCase(rest, "bearer ")) {
    skip = 7;
  } else if (!(startsWithIgnoreCase(rest, "sk-") || startsWithIgnoreCase(rest, "kr-") ||
               startsWithIgnoreCase(rest, "ak-"))) {
    return 0;
  }
  std::size_t n = skip == 0 ? 3 : skip;
  std::size_t start = n;
  while (n < rest.size() && keyChar(rest[n]))
    ++n;
  std::size_t body = n - start;
  if (skip != 0) return body >= 1 ? n : 0;
  return body >= 6 ? n : 0;
}

}  // namespace

void redactSecrets(std::string& text, std::string_view secret) {
  if (secret.size() >= 8) {
    for (std::size_t at = text.find(secret); at != std::string::npos;
         at = text.find(secret, at + kMask.size())) {
      text.replace(at, secret.size(), kMask);
    }
  }
  std::string out;
  out.reserve(text.size());
  std::string_view view = text;
  for (std::size_t i = 0; i < view.size();) {
    std::size_t n = keyTokenAt(view, i);
    if (n > 0) {
      if (startsWithIgnoreCase(view.substr(i), "bearer ")) out.append(view.substr(i, 7));
      out.append(kMask);
      i += n;
    } else {
      out.push_back(view[i]);
      ++i;
    }
  }
  text = std::move(out);
}

}  // namespace relay
