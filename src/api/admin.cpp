#include "relay/api/admin.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <openssl/crypto.h>

#include "relay/admission/key_store.hpp"
#include "relay/api/console.hpp"
#include "relay/api/events.hpp"
#include "relay/common/json_write.hpp"
#include "relay/pipeline/respond.hpp"

namespace relay::api {
namespace {

using pipeline::ApiError;

net::Task<void> answer(net::Exchange& ex, ApiError err) {
  co_await pipeline::respondError(*ex.response, Headers(), std::move(err));
}

bool readOnly(const net::Exchange& ex) {
  return ex.head.method == "GET" || ex.head.method == "HEAD";
}

net::Task<void> reload(net::Exchange& ex, AdminState& state) {
  // The reload runs on a thread of its own; this loop keeps serving and
  // looks for the result now and then.
  std::shared_ptr<PendingText> pending = state.reload();
  co_await waitReady([&] { return pending->ready().has_value(); });
  std::string refused = *pending->ready();
  if (!refused.empty()) {
    ApiError err{422, "the new config was refused and the running one stays: " + refused,
                 "invalid_request_error", "config_invalid"};
    co_await pipeline::respondError(*ex.response, Headers(), std::move(err));
    co_return;
  }
  co_await pipeline::respondJson(*ex.response, 200, Headers(), "{\"status\":\"reloaded\"}");
}

// Every answer of the admin listener leaves with the console's security
// headers: one place, whichever handler answered.
class SecuredSink final : public net::ResponseSink {
 public:
  explicit SecuredSink(net::ResponseSink& inner) : inner_(inner) {}
  net::Task<bool> respond(net::ResponseHead head, std::string body) override {
    addAdminSecurityHeaders(head.headers);
    return inner_.respond(std::move(head), std::move(body));
  }
  net::Task<bool> start(net::ResponseHead head) override {
    addAdminSecurityHeaders(head.headers);
    return inner_.start(std::move(head));
  }
  net::Task<bool> write(std::string_view bytes) override { return inner_.write(bytes); }
  net::Task<bool> finish() override { return inner_.finish(); }
  net::Task<bool> finishWith(std::string_view last) override { return inner_.finishWith(last); }
  void abort() override { inner_.abort(); }
  bool started() const override { return inner_.started(); }
  bool clientGone() const override { return inner_.clientGone(); }

 private:
  net::ResponseSink& inner_;
};

// Puts the exchange's own sink back however the handler ends (the session
// may still use it after an exception).
struct SinkSwap {
  SinkSwap(net::Exchange& ex, net::ResponseSink& replacement) : ex_(ex), saved_(ex.response) {
    ex.response = &replacement;
  }
  ~SinkSwap() { ex_.response = saved_; }
  SinkSwap(const SinkSwap&) = delete;
  SinkSwap& operator=(const SinkSwap&) = delete;
  net::Exchange& ex_;
  net::ResponseSink* saved_;
};

net::Task<void> route(net::Exchange& ex, AdminState& state);

}  // namespace

net::Task<void> waitReady(const std::function<bool()>& ready) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  auto pause = std::chrono::milliseconds(1);
  while (!ready()) {
    timer.expires_after(pause);
    co_await timer.async_wait(boost::asio::use_awaitable);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

bool hasAdminKey(const pipeline::Snapshot& snapshot, const Headers& headers) {
  admission::Digest expected{};
  if (!admission::fromHex(snapshot.config.admin.keySha256, expected)) return false;
  std::string_view key = headers.get("x-api-key");
  std::string_view auth = headers.get("authorization");
  if (auth.size() > 7 && equalsIgnoreCase(auth.substr(0, 7), "bearer ")) key = auth.substr(7);
  if (key.empty()) return false;
  admission::Digest got = admission::sha256(key);
  return CRYPTO_memcmp(got.data(), expected.data(), got.size()) == 0;
}

net::Task<void> serveMetrics(net::Exchange& ex, const telemetry::Metrics& metrics) {
  net::ResponseHead head;
  head.status = 200;
  head.headers.add("content-type", telemetry::Metrics::kContentType);
  std::string body = metrics.expose();
  co_await ex.response->respond(std::move(head), std::move(body));
}

net::Handler adminHandler(AdminState& state) {
  return [&state](net::Exchange& ex) -> net::Task<void> {
    SecuredSink secured(*ex.response);
    SinkSwap swap(ex, secured);
    co_await route(ex, state);
  };
}

namespace {

net::Task<void> route(net::Exchange& ex, AdminState& state) {
  {
    const std::string& path = ex.head.path;
    if (path == "/healthz" && readOnly(ex)) {
      return pipeline::respondJson(*ex.response, 200, {}, "{\"status\":\"ok\"}");
    }
    if (path == "/readyz" && readOnly(ex)) {
      bool draining = state.draining.load();
      bool ready = state.ready.load() && !draining;
      return pipeline::respondJson(*ex.response, ready ? 200 : 503, {},
                                   ready      ? "{\"status\":\"ready\"}"
                                   : draining ? "{\"status\":\"draining\"}"
                                              : "{\"status\":\"starting\"}");
    }
    if (path == "/metrics" && readOnly(ex) && state.metrics)
      return serveMetrics(ex, *state.metrics);
    if (path == "/admin/events") return handleEvents(state.snapshot(), ex, std::string(), true);
    if (isConsoleAsset(path)) return serveConsoleAsset(ex);
    if (path == "/admin/reload" || path == "/admin/keys" || path.starts_with("/admin/keys/") ||
        path.starts_with("/admin/console/")) {
      auto snap = state.snapshot();
      if (snap->config.admin.keySha256.empty()) {
        return answer(ex, ApiError{403, "admin actions are disabled: set admin.key_sha256",
                                   "invalid_request_error", "admin_disabled"});
      }
      if (!hasAdminKey(*snap, ex.head.headers)) {
        return answer(ex, ApiError{401, ex.head.method + " " + path + " needs the admin key",
                                   "invalid_request_error", "invalid_api_key"});
      }
      if (path.starts_with("/admin/console/")) return serveConsoleData(ex, state);
      if (path != "/admin/reload") return handleAdminKeys(ex, state);
      if (ex.head.method == "POST" && state.reload) return reload(ex, state);
    }
    bool known =
        path == "/healthz" || path == "/readyz" || path == "/metrics" || path == "/admin/reload";
    if (known) {
      Headers h;
      h.add("allow", path == "/admin/reload" ? "POST" : "GET");
      return pipeline::respondError(*ex.response, std::move(h),
                                    ApiError{405, ex.head.method + " is not supported on " + path,
                                             "invalid_request_error", "method_not_allowed"});
    }
    return answer(ex, ApiError{404, "Unknown admin URL: " + ex.head.method + " " + path + ".",
                               "invalid_request_error", "unknown_url"});
  }
}

}  // namespace

}  // namespace relay::api
