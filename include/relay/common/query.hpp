// Reading a request's query string (`a=1&b=two%20words`).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace relay {

// The first value of `name`, percent-decoded ('+' as space); nullopt when
// absent or not validly encoded.
std::optional<std::string> queryParam(std::string_view query, std::string_view name);

}  // namespace relay
