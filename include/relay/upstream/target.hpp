// Where an upstream lives, parsed once from its base_url.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace relay::upstream {

struct Target {
  bool tls = true;
  std::string host;  // DNS name or IP literal (without brackets)
  std::uint16_t port = 443;
  std::string basePath;    // "/v1" (no trailing slash; "" for the root)
  std::string hostHeader;  // "api.moonshot.cn" or "127.0.0.1:8081" (port when not default)

  // `base` + `/chat/completions` -> "/v1/chat/completions".
  std::string path(std::string_view suffix) const { return basePath + std::string(suffix); }
};

// Parses "https://host[:port][/path]" or "http://...". Throws std::invalid_argument
// with a reason. A base_url is configuration, never caller input.
Target parseTarget(std::string_view baseUrl);

}  // namespace relay::upstream
