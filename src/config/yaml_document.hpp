// Text -> the one YAML document of a config file, with syntax errors turned
// into "FILE:LINE:COLUMN: invalid YAML: ..." ConfigErrors.
#pragma once

#include <string_view>

#include <yaml-cpp/yaml.h>

#include "yaml_reader.hpp"

namespace relay::config::detail {

// Throws ConfigError for invalid YAML, for an empty file and for a file that
// holds more than one document.
YAML::Node loadSingleDocument(std::string_view text, const Source& source);

}  // namespace relay::config::detail
