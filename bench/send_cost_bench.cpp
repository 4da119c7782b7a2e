// What one non-blocking write of a head and body costs the kernel, three
// ways, over TCP on loopback: sendmsg() with the pieces gathered, the pieces
// copied into one block and send(), and (for scale) send() of one block
// that was already whole. Each iteration also reads the bytes back on the
// peer, the same way for all three, so compare the rows, not the absolute
// figures. relay/net/send_now.hpp's kSendNowCopyMax comes from where the
// first two cross.
//   build/bench/send_cost_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <vector>

namespace {

// A connected loopback TCP pair: [0] is written, [1] read.
struct Loopback {
  int fd[2] = {-1, -1};
  Loopback() {
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listener, 1) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("loopback listener");
    fd[0] = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(fd[0], reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("loopback connect");
    fd[1] = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    const int one = 1;
    for (int f : fd)
      ::setsockopt(f, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Loopback() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void drain(std::size_t bytes) {
    static char sink[64 * 1024];
    while (bytes > 0) {
      const ssize_t n = ::recv(fd[1], sink, sizeof sink, 0);
      if (n <= 0) throw std::runtime_error("loopback read");
      bytes -= static_cast<std::size_t>(n);
    }
  }
};

constexpr std::size_t kHead = 200;  // about an answer head's size

void gatheredSendmsg(benchmark::State& state) {
  const auto total = static_cast<std::size_t>(state.range(0));
  Loopback link;
  std::vector<char> bytes(total, 'x');
  for (auto _ : state) {
    iovec iov[2] = {{bytes.data(), kHead}, {bytes.data() + kHead, total - kHead}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    benchmark::DoNotOptimize(::sendmsg(link.fd[0], &msg, MSG_DONTWAIT | MSG_NOSIGNAL));
    link.drain(total);
  }
}

void copiedSend(benchmark::State& state) {
  const auto total = static_cast<std::size_t>(state.range(0));
  Loopback link;
  std::vector<char> bytes(total, 'x'), block(total);
  for (auto _ : state) {
    std::memcpy(block.data(), bytes.data(), kHead);
    std::memcpy(block.data() + kHead, bytes.data() + kHead, total - kHead);
    benchmark::DoNotOptimize(::send(link.fd[0], block.data(), total, MSG_DONTWAIT | MSG_NOSIGNAL));
    link.drain(total);
  }
}

void wholeSend(benchmark::State& state) {
  const auto total = static_cast<std::size_t>(state.range(0));
  Loopback link;
  std::vector<char> bytes(total, 'x');
  for (auto _ : state) {
    benchmark::DoNotOptimize(::send(link.fd[0], bytes.data(), total, MSG_DONTWAIT | MSG_NOSIGNAL));
    link.drain(total);
  }
}

}  // namespace

BENCHMARK(gatheredSendmsg)
    ->Arg(600)
    ->Arg(1024)
    ->Arg(1536)
    ->Arg(2048)
    ->Arg(4096)
    ->Arg(8192)
    ->Arg(32768);
BENCHMARK(copiedSend)->Arg(600)->Arg(1024)->Arg(1536)->Arg(2048)->Arg(4096)->Arg(8192)->Arg(32768);
BENCHMARK(wholeSend)->Arg(600)->Arg(1024)->Arg(1536)->Arg(2048)->Arg(4096)->Arg(8192)->Arg(32768);
BENCHMARK_MAIN();
