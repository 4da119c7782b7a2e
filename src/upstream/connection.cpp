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
    : list_(asio::use_service<WatchdogList>(asio::query(executor, asio::execution::context))) {
  list_.attach(executor);
}

Watchdog::~Watchdog() {
  disarm();
}

void Watchdog::set(Clock::time_point deadline, FailureKind kind) {
  kind_ = kind;
  deadline_ = deadline;
  if (socket_ == nullptr) return;  // nothing to close (not watching, or fired already)
  if (!linked_) list_.link(*this);
  list_.wakeBy(deadline);
}

void Watchdog::disarm() {
  socket_ = nullptr;
  deadline_ = Clock::time_point::max();
  if (linked_) list_.unlink(*this);
}

void WatchdogList::link(Watchdog& w) {
  w.prev_ = nullptr;
  w.next_ = head_;
  if (head_ != nullptr) head_->prev_ = &w;
  head_ = &w;
  w.linked_ = true;
  ++armed_;
}

void WatchdogList::unlink(Watchdog& w) {
  if (w.prev_ != nullptr) {
    w.prev_->next_ = w.next_;
  } else {
    head_ = w.next_;
  }
  if (w.next_ != nullptr) w.next_->prev_ = w.prev_;
  w.prev_ = w.next_ = nullptr;
  w.linked_ = false;
  --armed_;
  // Nothing left to watch: the wait goes too (a pending wait is work, and
  // keeps a context's run() from returning).
  if (armed_ == 0 && timerAt_ != Clock::time_point::max() && timer_) {
    timerAt_ = Clock::time_point::max();
    timer_->cancel();
  }
}

void WatchdogList::wakeBy(Clock::time_point deadline) {
  if (deadline >= timerAt_ || !timer_) return;
  timerAt_ = deadline;
  timer_->expires_at(deadline);  // cancels the wait pending, if any
  timer_->async_wait([this](boost::system::error_code ec) {
    // Cancelled: the timer was moved earlier (that wait is pending now), or
    // nothing is left to watch.
    if (ec) return;
    timerAt_ = Clock::time_point::max();
    expire();
  });
}

void WatchdogList::expire() {
  const Clock::time_point now = Clock::now();
  Clock::time_point next = Clock::time_point::max();
  for (Watchdog* w = head_; w != nullptr;) {
    Watchdog* following = w->next_;
    if (w->deadline_ <= now) {
      tcp::socket* socket = w->socket_;
      w->fired_ = w->kind_;
      w->disarm();  // unlinks it
      boost::system::error_code ignored;
      socket->close(ignored);  // its pending operations complete later, with operation_aborted
    } else if (w->deadline_ < next) {
      next = w->deadline_;
    }
    w = following;
  }
  if (next != Clock::time_point::max()) wakeBy(next);
}

}  // namespace relay::upstream
