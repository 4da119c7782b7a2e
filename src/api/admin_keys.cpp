// The runtime key API on the admin listener (admin key already checked):
//   GET    /admin/keys                 every key: settings, source, usage
//   POST   /admin/keys                 create {"name", settings...}: the secret, once
//   GET    /admin/keys/{name}          one key
//   PATCH  /admin/keys/{name}          change settings (null gives a file key's field back)
//   DELETE /admin/keys/{name}          revoke, at once
//   POST   /admin/keys/{name}/rotate   new secret; the old one stays valid for
//                                      {"grace_seconds": N} (default 3600)
// Changes run off the event loops (they write keys.json and rebuild the
// snapshot every worker switches to); reads are served from the running
// snapshot. No secret is ever listed: only digests' owners by name.
#include <charconv>
#include <chrono>

#include <nlohmann/json.hpp>

#include "key_view.hpp"
#include "relay/admission/clock.hpp"
#include "relay/api/admin.hpp"
#include "relay/config/parse.hpp"
#include "relay/pipeline/respond.hpp"

namespace relay::api {
namespace {

using nlohmann::json;
using pipeline::ApiError;

const admission::Tenant* findTenant(const pipeline::Snapshot& snap, std::string_view name) {
  for (const admission::Tenant& t : snap.keys.tenants()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

net::Task<void> sendJson(net::Exchange& ex, int status, std::string body) {
  co_await pipeline::respondJson(*ex.response, status, Headers(), std::move(body));
}

net::Task<void> sendError(net::Exchange& ex, ApiError e) {
  co_await pipeline::respondError(*ex.response, Headers(), std::move(e));
}

net::Task<void> change(net::Exchange& ex, AdminState& state, KeyOp op) {
  std::shared_ptr<PendingReply> pending = state.keyChange(std::move(op));
  co_await waitReady([&] { return pending->ready().has_value(); });
  Reply reply = *pending->ready();
  co_await sendJson(ex, reply.status, std::move(reply.body));
}

}  // namespace

namespace {

// GET /admin/keys: every key of the snapshot, and the file keys revoked at runtime.
net::Task<void> listKeys(net::Exchange& ex, const pipeline::Snapshot& snap, AdminState& state) {
  json list = json::array();
  for (const admission::Tenant& t : snap.keys.tenants())
    list.push_back(describeKey(snap, t, state.registry));
  if (state.registry) {
    for (const std::string& revoked : state.registry->revokedFileKeys())
      list.push_back({{"name", revoked}, {"source", "file"}, {"revoked", true}});
  }
  std::string text = json{{"object", "list"}, {"data", list}}.dump();
  co_await sendJson(ex, 200, std::move(text));
}

// POST /admin/keys: the body names the key; the registry checks the rest.
net::Task<void> createKey(net::Exchange& ex, AdminState& state) {
  json body = json::parse(ex.body, nullptr, false);
  std::string keyName = body.is_object() && body.contains("name") && body["name"].is_string()
                            ? body["name"].get<std::string>()
                            : std::string();
  if (keyName.empty()) {
    ApiError err{400, "the body must be a JSON object with a \"name\"", "invalid_request_error",
                 "invalid_key", "name"};
    co_await sendError(ex, std::move(err));
    co_return;
  }
  KeyOp op{KeyOp::Kind::kCreate, keyName, ex.body, 0};
  co_await change(ex, state, std::move(op));
}

// GET /admin/keys/NAME.
net::Task<void> showKey(net::Exchange& ex, const pipeline::Snapshot& snap, AdminState& state,
                        const std::string& name) {
  const admission::Tenant* t = findTenant(snap, name);
  if (!t) {
    ApiError err{404, "no key is named '" + name + "'", "invalid_request_error", "key_not_found"};
    co_await sendError(ex, std::move(err));
    co_return;
  }
  std::string text = describeKey(snap, *t, state.registry).dump();
  co_await sendJson(ex, 200, std::move(text));
}

// POST /admin/keys/NAME/rotate, with an optional {"grace_seconds": N}.
net::Task<void> rotateKey(net::Exchange& ex, AdminState& state, const std::string& name) {
  std::int64_t grace = admission::KeyRegistry::kDefaultGraceSeconds;
  json body = json::parse(ex.body.empty() ? std::string("{}") : ex.body, nullptr, false);
  if (body.is_object() && body.contains("grace_seconds")) {
    if (!body["grace_seconds"].is_number_integer() ||
        body["grace_seconds"].get<std::int64_t>() < 0) {
      ApiError err{400, "grace_seconds must be a whole number >= 0", "invalid_request_error",
                   "invalid_key", "grace_seconds"};
      co_await sendError(ex, std::move(err));
      co_return;
    }
    grace = body["grace_seconds"].get<std::int64_t>();
  }
  KeyOp op{KeyOp::Kind::kRotate, name, std::string(), grace};
  co_await change(ex, state, std::move(op));
}

// 405 with the methods this path takes.
net::Task<void> notAllowed(net::Exchange& ex, const std::string& name, std::string_view action) {
  Headers h;
  std::string_view allow = name.empty()         ? std::string_view("GET, POST")
                           : action == "rotate" ? std::string_view("POST")
                                                : std::string_view("GET, PATCH, DELETE");
  h.add("allow", allow);
  ApiError err{405, ex.head.method + " is not supported on " + ex.head.path,
               "invalid_request_error", "method_not_allowed"};
  co_await pipeline::respondError(*ex.response, std::move(h), std::move(err));
}

}  // namespace

// /admin/keys[/NAME[/rotate]]: the body is read first (a refused one is
// answered as such), then the path and method pick one step.
net::Task<void> handleAdminKeys(net::Exchange& ex, AdminState& state) {
  const std::string& method = ex.head.method;
  std::string_view rest =
      std::string_view(ex.head.path).substr(std::string_view("/admin/keys").size());
  if (!rest.empty()) rest.remove_prefix(1);  // the '/'
  const std::size_t slash = rest.find('/');
  const std::string name(rest.substr(0, slash));
  const std::string_view action =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  if (method == "POST" || method == "PATCH") {
    net::BodyResult body = co_await ex.readBody();
    if (body.status == net::BodyStatus::kGone) co_return;
    if (!body.ok()) {
      const int status = body.httpStatus();
      ApiError err{status, body.message, status >= 500 ? "server_error" : "invalid_request_error",
                   std::string(body.code())};
      co_await sendError(ex, std::move(err));
      co_return;
    }
  }
  if (!state.keyChange) {
    ApiError err{503, "the key API is not available here", "server_error", "unavailable"};
    co_await sendError(ex, std::move(err));
    co_return;
  }
  std::shared_ptr<const pipeline::Snapshot> snap = state.snapshot();

  // (Each step a statement of its own: GCC 12 mishandles co_await inside
  // larger expressions.)
  if (name.empty() && method == "GET") {
    co_await listKeys(ex, *snap, state);
  } else if (name.empty() && method == "POST") {
    co_await createKey(ex, state);
  } else if (!name.empty() && action.empty() && method == "GET") {
    co_await showKey(ex, *snap, state, name);
  } else if (!name.empty() && action.empty() && method == "PATCH") {
    KeyOp op{KeyOp::Kind::kUpdate, name, ex.body, 0};
    co_await change(ex, state, std::move(op));
  } else if (!name.empty() && action.empty() && method == "DELETE") {
    KeyOp op{KeyOp::Kind::kRevoke, name, std::string(), 0};
    co_await change(ex, state, std::move(op));
  } else if (!name.empty() && action == "rotate" && method == "POST") {
    co_await rotateKey(ex, state, name);
  } else {
    co_await notAllowed(ex, name, action);
  }
}

}  // namespace relay::api
