// A read on a plain TCP socket that takes a short read as "drained", as
// nginx does, and finds its buffer at the moment it reads.
//
// Why: Asio 1.81 registers a socket edge-triggered once, and then per read
// either
//   - waits for readiness (async_wait): an EPOLL_CTL_MOD every time, to
//     re-arm, then epoll_wait, then our recv — three system calls; or
//   - reads speculatively (async_read_some): a recv that returns EAGAIN when
//     the last read already took everything, then epoll_wait, then the recv —
//     also three. Asio stops speculating only after a read of 0 bytes.
// A read of fewer bytes than asked for has emptied the socket's receive queue
// (the kernel copies until the queue is empty or the buffer full), and with
// edge-triggered registration any byte that arrives later brings a new event.
// So after a short read the next read need not try first: it waits in the
// reactor's queue, and epoll_wait plus one recv is all a read costs.
//
// The buffer: a pending read holds none. The bytes go into a beast
// flat_buffer that the read prepares and commits when the socket is
// readable, in one step. While the read is pending the owner may consume
// from that buffer (the HTTP/1.1 reader runs beside the parse); nothing
// else writes to it. An idle connection waiting for its next byte keeps no
// read buffer.
//
// How: the read is an ordinary async_read_some whose buffer sequence has its
// own type, EdgeRead, and Asio's receive operation for that type does
// the above (a specialisation of its per-buffer-type base, below). All else
// — handler allocation, cancellation, completion through the executor — is
// Asio's own. Single-threaded io_context only, as all of ours: the
// buffer is touched by the reactor when the socket is ready, on the thread
// that runs the owner.
#pragma once

#include <cstddef>
#include <stdexcept>

// clang-format off
// socket_base first: the detail header after it uses it without including it.
#include <boost/asio/socket_base.hpp>
#include <boost/asio/detail/reactive_socket_recv_op.hpp>
// clang-format on
#include <boost/asio/buffer.hpp>
#include <boost/asio/detail/socket_ops.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/version.hpp>

#if BOOST_VERSION / 100 != 1081
// The operation below replaces one of Asio's detail classes; check its
// members against the new release's reactive_socket_recv_op.hpp (and that
// the epoll reactor still keys speculation on done_and_exhausted) before
// changing this number.
#error "EdgeRead is written against Boost.Asio 1.81"
#endif

namespace relay::net {

// The buffer sequence of a draining read: one buffer of up to `chunk` bytes,
// prepared in `target` when the socket is readable and committed with what
// arrived. Holds no memory itself.
class EdgeRead : public boost::asio::mutable_buffer {
 public:
  EdgeRead(boost::beast::flat_buffer& target, std::size_t chunk)
      : boost::asio::mutable_buffer(nullptr, chunk), target_(&target) {}

  boost::beast::flat_buffer& target() const { return *target_; }

 private:
  boost::beast::flat_buffer* target_;
};

// How many bytes reach `target` from `socket` in one read; completes with
// (error_code, bytes). On EOF: error::eof and 0 bytes, as Asio's read.
template <typename Socket, typename Token>
auto asyncEdgeRead(Socket& socket, boost::beast::flat_buffer& target, std::size_t chunk,
                   Token&& token) {
  return socket.async_read_some(EdgeRead(target, chunk), std::forward<Token>(token));
}

}  // namespace relay::net

namespace boost::asio::detail {

template <>
class reactive_socket_recv_op_base<relay::net::EdgeRead> : public reactor_op {
 public:
  reactive_socket_recv_op_base(const boost::system::error_code& success_ec, socket_type socket,
                               socket_ops::state_type state, const relay::net::EdgeRead& buffers,
                               socket_base::message_flags flags, func_type complete_func)
      : reactor_op(success_ec, &reactive_socket_recv_op_base::do_perform, complete_func),
        socket_(socket),
        state_(state),
        buffers_(buffers),
        flags_(flags) {}

  static status do_perform(reactor_op* base) {
    auto* o = static_cast<reactive_socket_recv_op_base*>(base);
    boost::beast::flat_buffer& target = o->buffers_.target();
    boost::asio::mutable_buffer space;
    try {
      space = target.prepare(o->buffers_.size());
    } catch (const std::length_error&) {
      o->ec_ = boost::asio::error::no_buffer_space;
      o->bytes_transferred_ = 0;
      return done;
    }
    const bool stream = (o->state_ & socket_ops::stream_oriented) != 0;
    if (!socket_ops::non_blocking_recv1(o->socket_, space.data(), space.size(), o->flags_, stream,
                                        o->ec_, o->bytes_transferred_)) {
      // EAGAIN (a first read tried before any event): wait for the next
      // edge, and not with a buffer the owner had let go.
      if (target.size() == 0) target.shrink_to_fit();
      return not_done;
    }
    if (o->ec_) o->bytes_transferred_ = 0;  // EOF or an error: nothing arrived
    target.commit(o->bytes_transferred_);
    // Short (or none, at EOF or an error): the receive queue is empty; the
    // next read waits for readiness without trying first.
    return o->bytes_transferred_ < space.size() ? done_and_exhausted : done;
  }

 private:
  socket_type socket_;
  socket_ops::state_type state_;
  relay::net::EdgeRead buffers_;
  socket_base::message_flags flags_;
};

}  // namespace boost::asio::detail
