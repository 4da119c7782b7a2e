// The operator console's files, built into the binary from src/api/console/
// by cmake/EmbedFiles.cmake (a generated source of relay_api).
#pragma once

#include <span>
#include <string_view>

namespace relay::api {

struct ConsoleAsset {
  std::string_view path;         // "/console/app.js"
  std::string_view contentType;  // "text/javascript; charset=utf-8"
  std::string_view bytes;
};

// Every file, sorted by path.
std::span<const ConsoleAsset> consoleAssets();

}  // namespace relay::api
