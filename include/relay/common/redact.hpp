// Scrubbing secrets out of text that came from elsewhere (an upstream's error
// message) before it reaches a caller, a log line or an event.
#pragma once

#include <string>
#include <string_view>

namespace relay {

// Replaces in `text`:
//  - every occurrence of `secret` (when it is at least 8 bytes), and
//  - anything shaped like an API key, whole or masked: a token starting with
//    "sk-", "kr-" or "ak-" (any case) followed by at least 6 characters of
//    [A-Za-z0-9*._-], and the credential after "Bearer ",
// with "[redacted]". Providers quote the key they received in their errors
// ("Incorrect API key provided: sk-abc1***xyz9").
void redactSecrets(std::string& text, std::string_view secret = {});

}  // namespace relay
