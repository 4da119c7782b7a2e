// `${NAME}` expansion of scalar values.
//
// Grammar: `${NAME}` is replaced by the variable (unset or empty is an error:
// a secret must never silently become ""), `${NAME:-fallback}` uses the
// fallback when the variable is unset or empty, `$$` is a literal `$`, and any
// other `$` is kept as written. NAME is letters, digits and '_', not starting
// with a digit. Error texts never quote the value, which may hold a secret.
#pragma once

#include <string>
#include <string_view>

#include "relay/config/parse.hpp"

namespace relay::config::detail {

struct Expansion {
  std::string text;
  bool substituted = false;  // at least one ${...} was replaced
  std::string error;         // non-empty: what is wrong (text is then unusable)
};

Expansion expandEnv(std::string_view raw, const EnvLookup& env);

}  // namespace relay::config::detail
