#include "relay/net/send_now.hpp"

#include <cerrno>
#include <sys/socket.h>
#include <sys/uio.h>

namespace relay::net {

std::size_t sendNow(int fd, std::span<const boost::asio::const_buffer> buffers,
                    boost::system::error_code& ec) {
  ec.clear();
  iovec iov[kSendNowBuffers];
  std::size_t count = 0;
  for (const boost::asio::const_buffer& b : buffers) {
    if (b.size() == 0) continue;
    if (count == kSendNowBuffers) break;
    iov[count].iov_base = const_cast<void*>(b.data());
    iov[count].iov_len = b.size();
    ++count;
  }
  if (count == 0) return 0;
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = count;
  const ssize_t sent = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent >= 0) return static_cast<std::size_t>(sent);
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    ec.assign(errno, boost::system::system_category());
  return 0;
}

}  // namespace relay::net
