#include "relay/api/router.hpp"

#include "relay/api/models.hpp"
#include "relay/pipeline/chat.hpp"
#include "relay/pipeline/respond.hpp"

namespace relay::api {
namespace {

using pipeline::ApiError;

net::Task<void> notFound(net::Exchange& ex) {
  ApiError err{404, "Unknown request URL: " + ex.head.method + " " + ex.head.path + ".",
               "invalid_request_error", "unknown_url"};
  co_await pipeline::respondError(*ex.response, Headers(), std::move(err));
}

net::Task<void> methodNotAllowed(net::Exchange& ex, const char* allow) {
  Headers h;
  h.add("allow", allow);
  ApiError err{405, ex.head.method + " is not supported on " + ex.head.path + "; use " + allow + ".",
               "invalid_request_error", "method_not_allowed"};
  co_await pipeline::respondError(*ex.response, std::move(h), std::move(err));
}

net::Task<void> serveMetrics(net::Exchange& ex, const telemetry::Metrics& metrics) {
  net::ResponseHead head;
  head.status = 200;
  head.headers.add("content-type", telemetry::Metrics::kContentType);
  std::string body = metrics.expose();
  co_await ex.response->respond(std::move(head), std::move(body));
}

// OpenAI SDKs are pointed at ".../v1"; a few tools leave the /v1 out.
std::string_view apiPath(std::string_view path) {
  if (path.starts_with("/v1/")) return path.substr(3);
  return path;
}

}  // namespace

net::Handler mainHandler(pipeline::Worker& worker) {
  return [&worker](net::Exchange& ex) -> net::Task<void> {
    std::string_view path = apiPath(ex.head.path);
    if (path == "/chat/completions") {
      if (ex.head.method != "POST") return methodNotAllowed(ex, "POST");
      return pipeline::handleChatCompletions(worker, ex);
    }
    if (path == "/models") {
      if (ex.head.method != "GET") return methodNotAllowed(ex, "GET");
      return handleModels(worker, ex);
    }
    return notFound(ex);
  };
}

net::Handler adminHandler(AdminState& state) {
  return [&state](net::Exchange& ex) -> net::Task<void> {
    const std::string& path = ex.head.path;
    if (path == "/healthz") {
      if (ex.head.method != "GET" && ex.head.method != "HEAD") return methodNotAllowed(ex, "GET");
      return pipeline::respondJson(*ex.response, 200, {}, "{\"status\":\"ok\"}");
    }
    if (path == "/readyz") {
      if (ex.head.method != "GET" && ex.head.method != "HEAD") return methodNotAllowed(ex, "GET");
      bool ready = state.ready.load() && !state.draining.load();
      return pipeline::respondJson(*ex.response, ready ? 200 : 503, {},
                                   ready ? "{\"status\":\"ready\"}"
                                         : state.draining.load() ? "{\"status\":\"draining\"}"
                                                                 : "{\"status\":\"starting\"}");
    }
    if (path == "/metrics" && state.metrics) {
      if (ex.head.method != "GET" && ex.head.method != "HEAD") return methodNotAllowed(ex, "GET");
      return serveMetrics(ex, *state.metrics);
    }
    return notFound(ex);
  };
}

}  // namespace relay::api
