#include "relay/api/models.hpp"

#include "relay/common/json_write.hpp"
#include "relay/common/request_id.hpp"
#include "relay/pipeline/respond.hpp"
#include "relay/pipeline/steps.hpp"

namespace relay::api {

net::Task<void> handleModels(pipeline::Worker& worker, net::Exchange& ex) {
  auto snapshot = worker.snapshotPtr();
  Headers base;
  base.add("x-request-id", requestIdFrom(ex.head.headers.get("x-request-id")));
  const admission::Tenant* tenant = nullptr;
  if (auto err = pipeline::authenticate(snapshot->keys, ex.head.headers, tenant)) {
    co_await pipeline::respondError(*ex.response, std::move(base), *err);
    co_return;
  }
  std::string body = "{\"object\":\"list\",\"data\":[";
  bool first = true;
  for (const auto& route : snapshot->catalog.routes()) {
    if (!tenant->mayUse(route.model)) continue;
    if (!first) body += ',';
    first = false;
    body += "{\"id\":";
    appendJsonString(body, route.model);
    body += ",\"object\":\"model\",\"created\":0,\"owned_by\":\"kimi-relay\"}";
  }
  body += "]}";
  co_await pipeline::respondJson(*ex.response, 200, std::move(base), std::move(body));
}

}  // namespace relay::api
