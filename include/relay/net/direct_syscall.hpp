// send and recvmsg as bare system calls, not through libc's wrappers.
//
// libc's send(), sendmsg() and recvmsg() are thread cancellation points: in
// a process with threads each call marks the thread asynchronously
// cancellable before the call and back after it, two atomic updates of the
// thread's state and about 30 instructions per call (four calls per relayed
// JSON request: about 120 instructions, bench/callgrind.sh). kimi-relay
// never cancels a thread, so the calls on the path of every request go
// through syscall(2) instead, which does no more than the call itself.
// Same arguments, result and errno as the libc functions on 64-bit Linux
// (x86-64, AArch64). Elsewhere (a 32-bit target may route socket calls
// differently) and in sanitizer builds — whose interceptors on the libc
// functions check the buffers and, for ThreadSanitizer, see the ordering a
// socket gives between threads — the libc functions are called.
#pragma once

#include <cstddef>
#include <sys/socket.h>
#include <sys/types.h>

// GCC marks a sanitizer build with __SANITIZE_*__, clang with __has_feature.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RELAY_SANITIZED_BUILD 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RELAY_SANITIZED_BUILD 1
#endif

#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__)) && \
    !defined(RELAY_SANITIZED_BUILD)
#define RELAY_BARE_SOCKET_CALLS 1
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace relay::net {

inline ssize_t directSend(int fd, const void* data, std::size_t size, int flags) {
#ifdef RELAY_BARE_SOCKET_CALLS
  return ::syscall(SYS_sendto, fd, data, size, flags, nullptr, 0);
#else
  return ::send(fd, data, size, flags);
#endif
}

inline ssize_t directSendmsg(int fd, const ::msghdr* message, int flags) {
#ifdef RELAY_BARE_SOCKET_CALLS
  return ::syscall(SYS_sendmsg, fd, message, flags);
#else
  return ::sendmsg(fd, message, flags);
#endif
}

inline ssize_t directRecvmsg(int fd, ::msghdr* message, int flags) {
#ifdef RELAY_BARE_SOCKET_CALLS
  return ::syscall(SYS_recvmsg, fd, message, flags);
#else
  return ::recvmsg(fd, message, flags);
#endif
}

}  // namespace relay::net
