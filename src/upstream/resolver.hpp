// Name resolution for upstream connections that obeys the connect deadline
// and the caller's cancellation (private to upstream/).
//
// getaddrinfo blocks, and Asio's resolver runs it on one internal thread per
// io_context that a cancel cannot interrupt: a slow DNS server would hold a
// connect past its deadline and every other lookup of that worker behind it.
// Here lookups run on a small pool of their own threads; the awaiting
// coroutine waits on a timer that expires at the deadline, or is cancelled by
// the caller, or is woken by the result — whichever comes first. A lookup
// still running when its waiter gave up finishes in the background and its
// result is cached. Results are cached for kTtl (upstreams are a handful of
// names), and at most kMaxPending lookups wait for a thread: beyond that a
// connect fails at once instead of queueing without bound.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <boost/asio/ip/tcp.hpp>

#include "relay/upstream/client.hpp"

namespace relay::upstream::detail {

struct Resolved {
  std::vector<boost::asio::ip::tcp::endpoint> endpoints;  // empty on failure
  Failure failure;
};

// Resolves `host`:`port` by `deadline`. kConnect on a lookup error,
// kConnectTimeout past the deadline, kCancelled when the caller left.
Task<Resolved> resolve(const std::string& host, std::uint16_t port, Clock::time_point deadline);

inline constexpr std::chrono::seconds kResolverTtl{30};
inline constexpr std::size_t kResolverMaxPending = 256;

}  // namespace relay::upstream::detail
