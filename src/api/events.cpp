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

}  // namespace

net::Task<void> handleEvents(std::shared_ptr<const pipeline::Snapshot> snapshot,
                             net::Exchange& ex, std::string server, bool adminOnly) {
  const pipeline::Snapshot& snap = *snapshot;
  Headers base;
  base.add("x-request-id", requestIdFrom(ex.head.headers.get("x-request-id")));
  if (ex.head.method != "GET") {
    base.add("allow", "GET");
    ApiError e{405, ex.head.method + " is not supported on " + ex.head.path + "; use GET.",
               "invalid_request_error", "method_not_allowed"};
    co_await pipeline::respondError(*ex.response, std::move(base), std::move(e));
    co_return;
  }
  pipeline::EventFilter filter;
  if (hasAdminKey(snap, ex.head.headers)) {
    filter.admin = true;
    filter.key = queryParam(ex.head.query, "key").value_or("");
  } else if (adminOnly) {
    ApiError e{401, ex.head.path + " needs the admin key", "invalid_request_error",
               "invalid_api_key"};
    co_await pipeline::respondError(*ex.response, std::move(base), std::move(e));
    co_return;
  } else {
    const admission::Tenant* tenant = nullptr;
    if (auto err = pipeline::authenticate(snap.keys, ex.head.headers, tenant)) {
      co_await pipeline::respondError(*ex.response, std::move(base), std::move(*err));
      co_return;
    }
    filter.key = tenant->name;  // a caller sees only its own requests
  }
  std::string_view accept = ex.head.headers.get("accept");
  if (!accept.empty() && !pipeline::acceptOffers(accept, "text/event-stream") &&
      !pipeline::acceptOffers(accept, "*/*")) {
    ApiError e{406, "the event stream is text/event-stream; send Accept: text/event-stream",
               "invalid_request_error", "not_acceptable"};
    co_await pipeline::respondError(*ex.response, std::move(base), std::move(e));
    co_return;
  }
  if (!snap.events) {
    ApiError e{503, "this gateway has no event stream", "server_error", "events_unavailable"};
    co_await pipeline::respondError(*ex.response, std::move(base), std::move(e));
    co_return;
  }
  filter.kind = queryParam(ex.head.query, "kind").value_or("");
  filter.node = queryParam(ex.head.query, "node").value_or("");
  filter.upstream = queryParam(ex.head.query, "upstream").value_or("");
  filter.server = server.empty() ? queryParam(ex.head.query, "server").value_or("") : server;
  const std::string who = filter.admin ? std::string("the admin key") : "key '" + filter.key + "'";
  std::shared_ptr<pipeline::EventSubscription> sub =
      snap.events->subscribe(std::move(filter), lastEventId(ex.head));
  if (!sub) {
    base.add("retry-after", "5");
    ApiError e{429,
               who + " has " +
                   std::to_string(filter.admin ? pipeline::EventBus::kMaxAdminSubscribers
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

  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
  auto keepAliveAt = SteadyClock::now() + kKeepAlive;
  for (;;) {
    std::string out = sub->take();
    if (!out.empty()) {
      if (!co_await ex.response->write(out)) co_return;
      keepAliveAt = SteadyClock::now() + kKeepAlive;
      continue;
    }
    if (ex.response->clientGone()) co_return;
    if (sub->closed()) {  // the gateway drains: end cleanly (the client reconnects elsewhere)
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

}  // namespace relay::api
