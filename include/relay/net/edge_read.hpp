// A read on a plain TCP socket that knows when it has drained the socket, as
// nginx does, and finds its buffer at the moment it reads.
//
// Why: Asio 1.81 registers a socket edge-triggered once, and then per read
// either
//   - waits for readiness (async_wait): an EPOLL_CTL_MOD every time, to
//     re-arm, then epoll_wait, then our recv — three system calls; or
//   - reads speculatively (async_read_some): a recv that returns EAGAIN when
//     the last read already took everything, then epoll_wait, then the recv —
//     also three. Asio stops speculating only after a read of 0 bytes.
// When a read has left nothing behind, any byte that arrives later brings a
// new edge-triggered event, so the next read need not try first: it waits in
// the reactor's queue, and epoll_wait plus one recv is all a read costs.
//
// "Left nothing behind" is the kernel's answer, not a guess from a short
// read: a recv that takes the last bytes together with the peer's FIN also
// returns short, and no event follows it — the next read would wait forever
// for an end it was never told about. With TCP_INQ set on the socket, every
// recvmsg returns how many bytes are still queued, and 1 after a FIN
// (tcp_inq_hint()); only 0 counts as drained. The option is set by the
// socket's first edge read (one setsockopt per connection); until then, and
// whenever bytes or an end are left, the next read tries at once, as Asio's.
// (A kernel without TCP_INQ, before Linux 4.18, refuses the option at every
// read: each costs one call more and none counts as drained — Asio's own
// behaviour, plus a setsockopt.)
//
// The buffer: a pending read holds none. The bytes go into a beast
// flat_buffer that the read prepares and commits when the socket is
// readable, in one step (a read tried at once that finds nothing gives back
// the room it made). While the read is pending the owner may consume from
// that buffer (the HTTP/1.1 reader runs beside the parse); nothing else
// writes to it. An owner that releases its emptied buffer (the HTTP/1.1
// session, the upstream client) keeps no read buffer while it waits.
//
// How: the read is an ordinary async_read_some whose buffer sequence has its
// own type, EdgeRead, and Asio's receive operation for that type does
// the above (a specialisation of its per-buffer-type base, below). All else
// — handler allocation, cancellation, completion through the executor — is
// Asio's own. Single-threaded io_context only, as all of ours: the
// buffer is touched by the reactor when the socket is ready, on the thread
// that runs the owner.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <new>
#include <stdexcept>
#include <string_view>
#include <sys/socket.h>
#include <sys/uio.h>
#include <type_traits>

// clang-format off
// socket_base first: the detail header after it uses it without including it.
#include <boost/asio/socket_base.hpp>
#include <boost/asio/detail/reactive_socket_recv_op.hpp>
// clang-format on
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/version.hpp>

#include "relay/net/direct_syscall.hpp"
#include "relay/net/read_buffer.hpp"

#if BOOST_VERSION / 100 != 1081
// The operation below replaces one of Asio's detail classes; check its
// members against the new release's reactive_socket_recv_op.hpp (and that
// the epoll reactor still keys speculation on done_and_exhausted) before
// changing this number.
#error "EdgeRead is written against Boost.Asio 1.81"
#endif

namespace relay::net {

// The buffer sequence of an edge read: one buffer of up to `chunk` bytes,
// prepared in `target` when the socket is readable and committed with what
// arrived. Holds no memory itself.
class EdgeRead : public boost::asio::mutable_buffer {
 public:
  EdgeRead(ReadBuffer& target, std::size_t chunk)
      : boost::asio::mutable_buffer(nullptr, chunk), target_(&target) {}

  ReadBuffer& target() const { return *target_; }

 private:
  ReadBuffer* target_;
};

// How many bytes reach `target` from `socket` in one read; completes with
// (error_code, bytes). On EOF: error::eof and 0 bytes, as Asio's read.
// Plain TCP sockets only: EdgeRead's data pointer is null, and only the
// receive operation below knows to ask `target` instead.
template <typename Socket, typename Token>
auto asyncEdgeRead(Socket& socket, ReadBuffer& target, std::size_t chunk, Token&& token) {
  static_assert(std::is_same_v<typename Socket::protocol_type, boost::asio::ip::tcp>,
                "an edge read is for a plain TCP socket");
  return socket.async_read_some(EdgeRead(target, chunk), std::forward<Token>(token));
}

// The bytes `buffer` holds, as text (for the parsers that read them in place).
inline std::string_view bufferView(const ReadBuffer& buffer) {
  const auto bytes = buffer.data();
  return {static_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace relay::net

namespace boost::asio::detail {

template <>
class reactive_socket_recv_op_base<relay::net::EdgeRead> : public reactor_op {
 public:
  reactive_socket_recv_op_base(const boost::system::error_code& success_ec, socket_type socket,
                               socket_ops::state_type /*state: always a stream socket*/,
                               const relay::net::EdgeRead& buffers,
                               socket_base::message_flags flags, func_type complete_func)
      : reactor_op(success_ec, &reactive_socket_recv_op_base::do_perform, complete_func),
        socket_(socket),
        buffers_(buffers),
        flags_(flags) {}

  static status do_perform(reactor_op* base) {
    auto* o = static_cast<reactive_socket_recv_op_base*>(base);
    relay::net::ReadBuffer& target = o->buffers_.target();
    const std::size_t heldBefore = target.capacity();
    boost::asio::mutable_buffer space;
    try {
      space = target.prepare(o->buffers_.size());
    } catch (const std::length_error&) {  // past the buffer's max_size
      o->ec_ = boost::asio::error::no_buffer_space;
      o->bytes_transferred_ = 0;
      return done;
    } catch (const std::bad_alloc&) {  // never out of the reactor
      o->ec_ = boost::asio::error::no_memory;
      o->bytes_transferred_ = 0;
      return done;
    }
    alignas(::cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    ::iovec iov{space.data(), space.size()};
    ::msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n;
    do {
      n = relay::net::directRecvmsg(o->socket_, &msg, o->flags_ | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // A read tried before any event: wait for the next edge, and not with
      // room grown for it — the owner's bytes only, as before the read.
      if (target.capacity() > heldBefore) target.shrink_to_fit();
      return not_done;
    }
    o->bytes_transferred_ = 0;
    if (n < 0) {
      o->ec_ = boost::system::error_code(errno, boost::asio::error::get_system_category());
      return done;
    }
    if (n == 0) {
      o->ec_ = boost::asio::error::eof;
      return done;  // a read after this one tries at once, and sees the end again
    }
    o->bytes_transferred_ = static_cast<std::size_t>(n);
    target.commit(o->bytes_transferred_);
    int inq = -1;
    for (::cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_TCP && c->cmsg_type == TCP_CM_INQ)
        std::memcpy(&inq, CMSG_DATA(c), sizeof inq);
    }
    // Nothing left and no FIN taken: the next read waits for the next edge
    // without trying first.
    if (inq == 0) return done_and_exhausted;
    // The socket's first read: ask for the count from now on (one setsockopt
    // per connection). Until then, and with bytes or an end still to read,
    // the next read tries at once, as Asio's own.
    if (inq < 0) {
      const int on = 1;
      ::setsockopt(o->socket_, SOL_TCP, TCP_INQ, &on, sizeof on);
    }
    return done;
  }

 private:
  socket_type socket_;
  relay::net::EdgeRead buffers_;
  socket_base::message_flags flags_;
};

}  // namespace boost::asio::detail
