// Method + path -> endpoint, for the main and the admin listeners.
#pragma once

#include "relay/api/admin.hpp"
#include "relay/net/exchange.hpp"
#include "relay/pipeline/worker.hpp"

namespace relay::api {

// The main listener's handler on one worker: /v1/chat/completions, /v1/models.
net::Handler mainHandler(pipeline::Worker& worker);

}  // namespace relay::api
