// The console's files and its data endpoints (console.hpp). The files are
// the generated table of console_assets.hpp; the JSON comes from
// console_state.cpp.
#include "relay/api/console.hpp"

#include "console_state.hpp"
#include "relay/api/console_assets.hpp"
#include "relay/pipeline/respond.hpp"

namespace relay::api {
namespace {

using pipeline::ApiError;

const ConsoleAsset* findAsset(std::string_view path) {
  if (path == "/") path = "/console/index.html";
  for (const ConsoleAsset& a : consoleAssets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

net::Task<void> refuse(net::Exchange& ex, ApiError err, std::string_view allow) {
  Headers h;
  if (!allow.empty()) h.add("allow", allow);
  co_await pipeline::respondError(*ex.response, std::move(h), std::move(err));
}

}  // namespace

void addAdminSecurityHeaders(Headers& h) {
  h.set("content-security-policy", kConsoleCsp);
  h.set("x-content-type-options", "nosniff");
  h.set("referrer-policy", "no-referrer");
  h.set("x-frame-options", "DENY");
  h.set("cross-origin-resource-policy", "same-origin");
  if (!h.contains("cache-control")) h.add("cache-control", "no-store");
}

bool isConsoleAsset(std::string_view path) {
  return path == "/" || path.starts_with("/console/");
}

net::Task<void> serveConsoleAsset(net::Exchange& ex) {
  const ConsoleAsset* asset = findAsset(ex.head.path);
  if (!asset) {
    ApiError err{404, "Unknown console file: " + ex.head.path + ".", "invalid_request_error",
                 "unknown_url"};
    co_await refuse(ex, std::move(err), {});
    co_return;
  }
  if (ex.head.method != "GET" && ex.head.method != "HEAD") {
    ApiError err{405, ex.head.method + " is not supported on " + ex.head.path + "; use GET.",
                 "invalid_request_error", "method_not_allowed"};
    co_await refuse(ex, std::move(err), "GET, HEAD");
    co_return;
  }
  net::ResponseHead head;
  head.status = 200;
  head.headers.add("content-type", asset->contentType);
  // The files change only with the binary: the browser asks again each
  // time (cheap on loopback) rather than keep a stale script.
  head.headers.add("cache-control", "no-cache");
  std::string body(asset->bytes);
  co_await ex.response->respond(std::move(head), std::move(body));
}

net::Task<void> serveConsoleData(net::Exchange& ex, AdminState& state) {
  const std::string& path = ex.head.path;
  const bool history = path == "/admin/console/history";
  if (!history && path != "/admin/console/state") {
    ApiError err{404, "Unknown admin URL: " + ex.head.method + " " + path + ".",
                 "invalid_request_error", "unknown_url"};
    co_await refuse(ex, std::move(err), {});
    co_return;
  }
  if (ex.head.method != "GET") {
    ApiError err{405, ex.head.method + " is not supported on " + path + "; use GET.",
                 "invalid_request_error", "method_not_allowed"};
    co_await refuse(ex, std::move(err), "GET");
    co_return;
  }
  std::string body = history ? consoleHistoryJson(state) : consoleStateJson(state);
  Headers h;
  co_await pipeline::respondJson(*ex.response, 200, std::move(h), std::move(body));
}

}  // namespace relay::api
