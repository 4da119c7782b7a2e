// "did you mean ...?" for unknown keys.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace relay::config::detail {

// The known key closest to `unknown`: the same key written in another case or
// with camelCase instead of snake_case, or else the one fewest edits away
// (insert, delete, replace, swap two neighbours) when that is close enough to
// be a typo. nullopt when nothing is close.
std::optional<std::string_view> closestKey(std::string_view unknown,
                                           const std::vector<std::string_view>& known);

// Edits (insert, delete, replace, swap of neighbours) that turn a into b.
std::size_t editDistance(std::string_view a, std::string_view b);

}  // namespace relay::config::detail
