#include "connection.hpp"

#include <cerrno>
#include <sys/socket.h>

namespace relay::upstream {

bool Connection::looksDead() {
  char byte;
  ssize_t n = ::recv(socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;                                              // FIN from the upstream
  if (n > 0) return true;                                               // bytes nobody asked for
  return !(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);  // reset etc.
}

Watchdog::Watchdog(const asio::any_io_executor& executor)
    : state_(std::make_shared<State>(executor)) {}

Watchdog::~Watchdog() {
  disarm();
}

void Watchdog::set(Clock::time_point deadline, FailureKind kind) {
  State& s = *state_;
  s.kind = kind;
  bool earlier = deadline < s.deadline;
  s.deadline = deadline;
  if (!s.waiting) {
    arm(state_);
  } else if (earlier && deadline < s.timer.expiry()) {
    s.timer.expires_at(deadline);  // cancels the pending wait; the callback re-arms
  }
}

void Watchdog::disarm() {
  state_->socket = nullptr;
  state_->deadline = Clock::time_point::max();
  if (state_->waiting) state_->timer.cancel();
}

void Watchdog::arm(const std::shared_ptr<State>& state) {
  if (state->deadline == Clock::time_point::max() || state->socket == nullptr) return;
  state->waiting = true;
  state->timer.expires_at(state->deadline);
  state->timer.async_wait([state](boost::system::error_code) {
    state->waiting = false;
    if (state->socket == nullptr) return;  // disarmed
    if (Clock::now() < state->deadline) {  // moved later (or earlier: re-armed) meanwhile
      arm(state);
      return;
    }
    state->fired = state->kind;
    boost::system::error_code ignored;
    state->socket->close(ignored);
    state->socket = nullptr;
  });
}

}  // namespace relay::upstream
