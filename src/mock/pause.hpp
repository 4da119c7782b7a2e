// Waiting inside a handler while watching for the client to leave.
//
// The session cancels the handler's coroutine (terminal cancellation) when the
// caller disconnects, which aborts a pending timer wait. The timer is also
// woken every 100 ms to check `clientGone()`, so a wait ends promptly even on a
// session that only sets the flag.
#pragma once

#include <cstdint>

#include "relay/net/exchange.hpp"

namespace relay::mock {

// Waits `ms`; true if it ran to the end, false if the client went away.
// May throw operation_aborted (a cancelled coroutine's next co_await does).
net::Task<bool> pauseFor(net::ResponseSink& sink, std::uint32_t ms);

// Waits until the client goes away (the `hang` fault).
net::Task<void> waitForClientGone(net::ResponseSink& sink);

}  // namespace relay::mock
