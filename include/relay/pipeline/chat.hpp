// POST /v1/chat/completions.
#pragma once

#include "relay/net/exchange.hpp"
#include "relay/pipeline/worker.hpp"

namespace relay::pipeline {

net::Task<void> handleChatCompletions(Worker& worker, net::Exchange& exchange);

}  // namespace relay::pipeline
