#include "relay/api/events.hpp"

#include <charconv>
#include <chrono>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "relay/api/admin.hpp"
#include "relay/common/query.hpp"
#include "relay/common/request_id.hpp"
#include "relay/pipeline/mcp_request.hpp"
#include "relay/pipeline/respond.hpp"
#include "relay/pipeline/steps.hpp"

namespace relay::api {
namespace {

using pipeline::ApiError;
using SteadyClock = std::chrono::steady_clock;

// How often a waiting stream looks at its queue (the latency of an event)
// and how often an idle one sends a keep-alive comment.
constexpr std::chrono::milliseconds kPoll{50};
constexpr std::chrono::seconds kKeepAlive{15};

std::optional<std::uint64_t> lastEventId(const net::RequestHead& head) {
  std::string_view v = head.headers.get("last-event-id");
  std::optional<std::string> fromQuery;
  if (v.empty() && (fromQuery = queryParam(head.query, "last_event_id"))) v = *fromQuery;
  std::uint64_t id = 0;
  if (v.empty() || std::from_chars(v.data(), v.data() + v.size(), id).ec != std::errc())
    return std::nullopt;
  return id;
}

// Why this request may not have the stream (a wrong method, no or a wrong
// key, an Accept without SSE, no event bus), or nothing: then `filter` says
// whose events it gets. A 405 adds its `allow` field to `base`.
std::optional<ApiError> refusal(const pipeline::Snapshot& snap, const net::RequestHead& head,
                                bool adminOnly, pipeline::EventFilter& filter, Headers& base) {
  if (head.method != "GET") {
    base.add("allow", "GET");
    return ApiError{405, head.method + " is not supported on " + head.path + "; use GET.",
                    "invalid_request_error", "method_not_allowed"};
  }
  if (hasAdminKey(snap, head.headers)) {
    filter.admin = true;
    filter.key = queryParam(head.query, "key").value_or("");
  } else if (adminOnly) {
    return ApiError{401, head.path + " needs the admin key", "invalid_request_error",
                    "invalid_api_key"};
  } else {
    const admission::Tenant* tenant = nullptr;
    if (auto err = pipeline::authenticate(snap.keys, head.headers, tenant)) return std::move(*err);
    filter.key = tenant->name;  // a caller sees only its own requests
  }
  std::string_view accept = head.headers.get("accept");
  if (!accept.empty() && !pipeline::acceptOffers(accept, "text/event-stream") &&
      !pipeline::acceptOffers(accept, "*/*")) {
    return ApiError{406, "the event stream is text/event-stream; send Accept: text/event-stream",
                    "invalid_request_error", "not_acceptable"};
  }
  if (!snap.events) {
    return ApiError{503, "this gateway has no event stream", "server_error", "events_unavailable"};
  }
  return std::nullopt;
}

// The stream itself: events as they come, a keep-alive comment when idle,
// a clean end when the gateway drains; until the caller leaves.
net::Task<void> pump(net::Exchange& ex, pipeline::EventSubscription& sub) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  auto keepAliveAt = SteadyClock::now() + kKeepAlive;
  for (;;) {
    std::string out = sub.take();
    if (!out.empty()) {
      if (!co_await ex.response->write(out)) co_return;
      keepAliveAt = SteadyClock::now() + kKeepAlive;
      continue;
    }
    if (ex.response->clientGone()) co_return;
    if (sub.closed()) {  // the gateway drains: end cleanly (the client reconnects elsewhere)
      co_await ex.response->finish();
      co_return;
    }
    if (SteadyClock::now() >= keepAliveAt) {
      static constexpr std::string_view kPing = ": keep-alive\n\n";
      if (!co_await ex.response->write(kPing)) co_return;
      keepAliveAt = SteadyClock::now() + kKeepAlive;
    }
    timer.expires_after(kPoll);
    auto [ec] = co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    if (ec) co_return;  // the caller left
  }
}

}  // namespace

net::Task<void> handleEvents(std::shared_ptr<const pipeline::Snapshot> snapshot, net::Exchange& ex,
                             std::string server, bool adminOnly) {
  const pipeline::Snapshot& snap = *snapshot;
  Headers base;
  base.add("x-request-id", requestIdFrom(ex.head.headers.get("x-request-id")));
  pipeline::EventFilter filter;
  if (std::optional<ApiError> refused = refusal(snap, ex.head, adminOnly, filter, base)) {
    co_await pipeline::respondError(*ex.response, std::move(base), std::move(*refused));
    co_return;
  }
  filter.kind = queryParam(ex.head.query, "kind").value_or("");
  filter.node = queryParam(ex.head.query, "node").value_or("");
  filter.upstream = queryParam(ex.head.query, "upstream").value_or("");
  filter.server = server.empty() ? queryParam(ex.head.query, "server").value_or("") : server;
  const bool admin = filter.admin;
  const std::string who = admin ? std::string("the admin key") : "key '" + filter.key + "'";
  std::shared_ptr<pipeline::EventSubscription> sub =
      snap.events->subscribe(std::move(filter), lastEventId(ex.head));
  if (!sub) {
    base.add("retry-after", "5");
    ApiError e{429,
               who + " has " +
                   std::to_string(admin ? pipeline::EventBus::kMaxAdminSubscribers
                                        : pipeline::EventBus::kMaxSubscribersPerKey) +
                   " event streams open already; close one",
               "requests", "too_many_event_streams"};
    co_await pipeline::respondError(*ex.response, std::move(base), std::move(e));
    co_return;
  }
  net::ResponseHead head;
  head.status = 200;
  head.headers = std::move(base);
  head.headers.add("content-type", "text/event-stream");
  head.headers.add("cache-control", "no-cache, no-transform");
  head.headers.add("x-accel-buffering", "no");
  if (!co_await ex.response->start(std::move(head))) co_return;
  std::string hello = "retry: 2000\n: kimi-relay events for " + who + "\n\n";
  if (!co_await ex.response->write(hello)) co_return;
  co_await pump(ex, *sub);
}

}  // namespace relay::api
