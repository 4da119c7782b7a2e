// The first write of an answer or a request: one non-blocking send.
//
// Most heads and bodies fit the socket's send buffer, so both the HTTP/1.1
// server session (answers to callers) and the upstream client (requests to
// upstreams) write them at once, with no round through the reactor, and only
// wait for room when this took less than everything.
#pragma once

#include <cstddef>
#include <span>

#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

namespace relay::net {

// The most buffers one call sends; the rest of a longer list waits for the
// caller's write of what is left.
inline constexpr std::size_t kSendNowBuffers = 8;

// Several buffers of this many bytes or fewer in all are copied into one
// block on the stack and sent with send(); more go by sendmsg() as they lie.
// Measured (bench/send_cost_bench): up to 2 KiB the copy and send() cost
// 50-75 ns less than sendmsg(), at 4 KiB 100 ns more.
inline constexpr std::size_t kSendNowCopyMax = 2048;

// Sends what it can of `buffers` on the non-blocking socket `fd` now
// (MSG_DONTWAIT: also on a blocking one; MSG_NOSIGNAL: a closed peer is an
// error, not a signal). Returns the bytes sent: 0 when the socket had no room
// or was interrupted, with `ec` left clear. `ec` is set only when the socket
// has failed (the peer reset it, or it is not a socket). Empty buffers are
// skipped; past the first kSendNowBuffers non-empty ones, nothing is sent.
std::size_t sendNow(int fd, std::span<const boost::asio::const_buffer> buffers,
                    boost::system::error_code& ec);

}  // namespace relay::net
