#include "relay/api/router.hpp"

#include "relay/api/admin.hpp"
#include "relay/api/events.hpp"
#include "relay/api/models.hpp"
#include "relay/pipeline/chat.hpp"
#include "relay/pipeline/mcp.hpp"
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
  ApiError err{405,
               ex.head.method + " is not supported on " + ex.head.path + "; use " + allow + ".",
               "invalid_request_error", "method_not_allowed"};
  co_await pipeline::respondError(*ex.response, std::move(h), std::move(err));
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
    if (path == "/embeddings") {
      if (ex.head.method != "POST") return methodNotAllowed(ex, "POST");
      return pipeline::handleEmbeddings(worker, ex);
    }
    if (path == "/models") {
      if (ex.head.method != "GET") return methodNotAllowed(ex, "GET");
      return handleModels(worker, ex);
    }
    if (path == "/events") return handleEvents(worker.snapshotPtr(), ex, std::string(), false);
    // MCP Streamable HTTP: the handler answers every method itself (405, CORS).
    if (path == "/mcp") return pipeline::handleMcp(worker, ex, std::string());
    if (path.starts_with("/mcp/")) {
      std::string_view rest = path.substr(5);
      if (rest.ends_with("/events") && rest.find('/') == rest.size() - 7) {
        return handleEvents(worker.snapshotPtr(), ex, std::string(rest.substr(0, rest.size() - 7)),
                            false);
      }
      return pipeline::handleMcp(worker, ex, std::string(rest));
    }
    if (ex.head.path == "/metrics" && worker.snapshot().config.server.metricsOnMain &&
        hasAdminKey(worker.snapshot(), ex.head.headers)) {
      return serveMetrics(ex, worker.snapshot().metrics);
    }
    return notFound(ex);
  };
}

}  // namespace relay::api
