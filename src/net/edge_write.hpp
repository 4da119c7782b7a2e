// The rest of a write on a plain TCP socket that a send just found full,
// as nginx writes it: wait for room, send what fits, wait again — one send
// per wait, and no completion until all of it went (private to net/).
//
// Why: a send that takes part of a write leaves the socket's buffer full.
// Asio's async_write then (1) tries the rest at once, a send that returns
// EAGAIN, (2) waits for the socket to become writable, (3) sends what fits
// and completes that step through the scheduler, and starts over at (1)
// while bytes are left, except that Asio skips (1) after its own partial
// send. Against a caller that reads slowly that was one EAGAIN send per wait
// (1,456 of 6,696 sends in `bench/slow_readers.sh` with 16 KiB send buffers,
// docs/benchmarks.md) and one handler dispatch per step.
//
// How: one write operation that stays queued in the reactor until the whole
// rest is sent. Each time the socket is writable it sends what fits; a
// partial send keeps it queued for the next edge (the socket is full again,
// so one will come). `waitFirst`: the caller's own send filled the socket
// in this same turn of the event loop, so the operation does not try before
// it waits. It must be that turn: an edge that arrived since the send is
// still in epoll's ready list until the loop next polls, and it reaches the
// operation queued now. An edge the loop already took (a write begun in a
// later turn) would never come again: such a write tries first.
//
// `waitFirst` skips the one send Asio makes as it starts the operation,
// which it makes unless one of its own sends on that socket found it full
// (done_and_exhausted). None does on the sockets this is for: every send on
// a plaintext HTTP/1.1 caller's socket is sendNow() or this operation, and
// neither reports done_and_exhausted. (An Asio async_write on such a socket
// before a waitFirst write would make the operation skip its first real
// send instead, and wait for an edge that may not come, until the session's
// stall watchdog resets the connection.)
//
// As with EdgeRead, the operation is an ordinary async_write_some whose
// buffer sequence has its own type, EdgeWrite, and Asio's send operation for
// that type does the above; cancellation and completion are Asio's own.
#pragma once

#include <cerrno>
#include <cstddef>
#include <span>

// clang-format off
#include <boost/asio/socket_base.hpp>
#include <boost/asio/detail/reactive_socket_send_op.hpp>
// clang-format on
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/version.hpp>

#include "relay/net/send_now.hpp"

#if BOOST_VERSION / 100 != 1081
// The operation below replaces one of Asio's detail classes; check its
// members against the new release's reactive_socket_send_op.hpp (and the
// epoll reactor's handling of not_done) before changing this number.
#error "EdgeWrite is written against Boost.Asio 1.81"
#endif

namespace relay::net {

// The buffer sequence of an edge write: `pieces` after their first `skip`
// bytes (at most kSendNowBuffers pieces). Its size is the bytes to send; its
// data pointer is null: only the send operation below reads the pieces,
// which the caller keeps alive until the write completes.
class EdgeWrite : public boost::asio::const_buffer {
 public:
  EdgeWrite(std::span<const boost::asio::const_buffer> pieces, std::size_t skip, std::size_t total,
            bool waitFirst)
      : boost::asio::const_buffer(nullptr, total - skip),
        pieces_(pieces),
        skip_(skip),
        waitFirst_(waitFirst) {}

  std::span<const boost::asio::const_buffer> pieces() const { return pieces_; }
  std::size_t skip() const { return skip_; }
  bool waitFirst() const { return waitFirst_; }

 private:
  std::span<const boost::asio::const_buffer> pieces_;
  std::size_t skip_;
  bool waitFirst_;
};

// Writes `pieces` after `skip` bytes (of `total`) to `socket`; completes
// with (error_code, bytes written) when all went or the socket failed.
template <typename Token>
auto asyncEdgeWrite(boost::asio::ip::tcp::socket& socket,
                    std::span<const boost::asio::const_buffer> pieces, std::size_t skip,
                    std::size_t total, bool waitFirst, Token&& token) {
  return socket.async_write_some(EdgeWrite(pieces, skip, total, waitFirst),
                                 std::forward<Token>(token));
}

// The pieces of `write` after `offset` bytes, into `out`; how many.
inline std::size_t piecesAfter(const EdgeWrite& write, std::size_t offset,
                               boost::asio::const_buffer (&out)[kSendNowBuffers]) {
  std::size_t count = 0;
  for (const boost::asio::const_buffer& b : write.pieces()) {
    if (offset >= b.size()) {
      offset -= b.size();
      continue;
    }
    if (count == kSendNowBuffers) break;
    out[count++] =
        boost::asio::buffer(static_cast<const char*>(b.data()) + offset, b.size() - offset);
    offset = 0;
  }
  return count;
}

}  // namespace relay::net

namespace boost::asio::detail {

template <>
class reactive_socket_send_op_base<relay::net::EdgeWrite> : public reactor_op {
 public:
  reactive_socket_send_op_base(const boost::system::error_code& success_ec, socket_type socket,
                               socket_ops::state_type /*state: always a stream socket*/,
                               const relay::net::EdgeWrite& buffers,
                               socket_base::message_flags /*flags: none*/, func_type complete_func)
      : reactor_op(success_ec, &reactive_socket_send_op_base::do_perform, complete_func),
        socket_(socket),
        buffers_(buffers),
        waitFirst_(buffers.waitFirst()) {}

  // done once everything went or the socket failed; not_done (stay queued
  // for the next writable edge) while the socket is full.
  static status do_perform(reactor_op* base) {
    auto* o = static_cast<reactive_socket_send_op_base*>(base);
    if (o->waitFirst_) {  // the start, right after the caller's send filled the socket
      o->waitFirst_ = false;
      return not_done;
    }
    const std::size_t total = o->buffers_.size();
    while (o->sent_ < total) {
      boost::asio::const_buffer rest[relay::net::kSendNowBuffers];
      const std::size_t count =
          relay::net::piecesAfter(o->buffers_, o->buffers_.skip() + o->sent_, rest);
      boost::system::error_code ec;
      errno = 0;
      const std::size_t n = relay::net::sendNow(o->socket_, std::span(rest, count), ec);
      if (ec) {
        o->ec_ = ec;
        o->bytes_transferred_ = o->sent_;
        return done;
      }
      if (n == 0) {
        if (errno == EINTR) continue;
        return not_done;  // full: the next edge
      }
      o->sent_ += n;
      o->bytes_transferred_ = o->sent_;  // also what a cancelled write had sent
      // Less than it was given: the socket is full again (another send now
      // would return EAGAIN). All of it, with pieces past kSendNowBuffers
      // left: those go at once.
      if (n < boost::asio::buffer_size(std::span(rest, count))) return not_done;
    }
    o->bytes_transferred_ = o->sent_;
    return done;
  }

 private:
  socket_type socket_;
  relay::net::EdgeWrite buffers_;
  std::size_t sent_ = 0;
  bool waitFirst_;
};

}  // namespace boost::asio::detail
