// GET /v1/models: the models this caller may use.
#pragma once

#include "relay/net/exchange.hpp"
#include "relay/pipeline/worker.hpp"

namespace relay::api {

net::Task<void> handleModels(pipeline::Worker& worker, net::Exchange& exchange);

}  // namespace relay::api
