#include "relay/net/send_now.hpp"

#include <cerrno>
#include <cstring>
#include <sys/socket.h>
#include <sys/uio.h>

#include "relay/net/direct_syscall.hpp"

namespace relay::net {

namespace {

std::size_t gatheredSize(const iovec* iov, std::size_t count) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < count; ++i)
    total += iov[i].iov_len;
  return total;
}

}  // namespace

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
  // One system call either way; send() costs the kernel less than sendmsg()
  // (no message header or vector to copy in), and below kSendNowCopyMax
  // copying the head and body into one block costs less than the difference
  // (docs/benchmarks.md). Larger writes keep the gather.
  ssize_t sent;
  if (count == 1) {
    sent = directSend(fd, iov[0].iov_base, iov[0].iov_len, MSG_DONTWAIT | MSG_NOSIGNAL);
  } else if (std::size_t total = gatheredSize(iov, count); total <= kSendNowCopyMax) {
    char block[kSendNowCopyMax];
    char* at = block;
    for (std::size_t i = 0; i < count; ++i) {
      std::memcpy(at, iov[i].iov_base, iov[i].iov_len);
      at += iov[i].iov_len;
    }
    sent = directSend(fd, block, total, MSG_DONTWAIT | MSG_NOSIGNAL);
  } else {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    sent = directSendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  if (sent >= 0) return static_cast<std::size_t>(sent);
  if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    ec.assign(errno, boost::system::system_category());
  return 0;
}

}  // namespace relay::net
