// send and recvmsg as bare system calls, not through libc's wrappers.
//
// libc's send(), sendmsg() and recvmsg() are thread cancellation points: in
// a process with threads each call marks the thread asynchronously
// cancellable before the call and back after it, two atomic updates of the
// thread's state and about 30 instructions per call (four calls per relayed
// JSON request: about 120 instructions, bench/callgrind.sh). kimi-relay
// never cancels a thread, so the calls on the path of every request go
// through syscall(2) instead, which does no more than the call itself.
// Same arguments, result and errno as the libc functions.
#pragma once

#include <cstddef>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace relay::net {

inline ssize_t directSend(int fd, const void* data, std::size_t size, int flags) {
  return ::syscall(SYS_sendto, fd, data, size, flags, nullptr, 0);
}

inline ssize_t directSendmsg(int fd, const ::msghdr* message, int flags) {
  return ::syscall(SYS_sendmsg, fd, message, flags);
}

inline ssize_t directRecvmsg(int fd, ::msghdr* message, int flags) {
  return ::syscall(SYS_recvmsg, fd, message, flags);
}

}  // namespace relay::net
