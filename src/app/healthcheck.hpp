// `kimi-relay healthcheck`: a container HEALTHCHECK that needs no curl in the image.
#pragma once

#include <string>
#include <vector>

namespace relay::app {

// GET http://HOST:PORT/healthz with a 2 s timeout; 0 when it answers 200.
// args: [--config FILE] (admin.listen) or [--url http://HOST:PORT/PATH]; the
// default is http://127.0.0.1:9090/healthz.
int healthcheck(const std::vector<std::string>& args);

}  // namespace relay::app
