// A coroutine parked until another part of its session wakes it: the
// HTTP/1.1 request loop waiting for its reader to bring bytes.
//
// A timer used as a wake-up signal costs, per wait, a queue insert under the
// reactor's lock, a cancel under the same lock, and a round through the
// scheduler before the waiter runs. A parked coroutine here is the
// completion handler of its co_await, kept in the session: waking it is a
// call, and the waiter runs at once on the waker's stack (resume()) — or
// later, through the scheduler, when the waker must not be re-entered
// (resumeLater()).
//
// Who owns a parked coroutine: the session does, and the coroutine holds its
// session (its frame keeps a shared_ptr), so neither would ever be freed if
// the io_context stopped with coroutines parked. Every park is therefore on
// a list that is a service of its io_context; when the context shuts down,
// the service destroys what is still parked (as the context does with the
// handlers of its own pending operations).
//
// Single-threaded: one park, its list and its wakers belong to one
// io_context run by one thread.
#pragma once

#include <optional>
#include <type_traits>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace relay::net {

class InputPark;

// The parked coroutines of one io_context.
class ParkedInputs final : public boost::asio::execution_context::service {
 public:
  using key_type = ParkedInputs;
  static inline boost::asio::execution_context::id id;

  explicit ParkedInputs(boost::asio::execution_context& context) : service(context) {}

 private:
  friend class InputPark;
  void shutdown() override;
  void link(InputPark& p);
  void unlink(InputPark& p);

  InputPark* head_ = nullptr;
};

class InputPark {
 public:
  // The handler a `co_await park()` leaves behind: the coroutine's whole
  // stack, resumed by calling it with the result of the wait.
  using Handler = boost::asio::detail::awaitable_handler<boost::asio::any_io_executor, bool>;
  // (An Asio detail type: Boost is pinned to 1.81. Should a later Asio hand
  // the initiation another type, this fails to compile rather than park
  // something else.)
  static_assert(std::is_same_v<
                boost::asio::async_result<boost::asio::use_awaitable_t<>, void(bool)>::handler_type,
                Handler>);

  explicit InputPark(const boost::asio::any_io_executor& executor)
      : list_(&boost::asio::use_service<ParkedInputs>(
            boost::asio::query(executor, boost::asio::execution::context))) {}
  ~InputPark() {
    if (handler_) list_->unlink(*this);
  }
  InputPark(const InputPark&) = delete;
  InputPark& operator=(const InputPark&) = delete;

  bool parked() const { return handler_.has_value(); }

  // co_await: suspends the calling coroutine until resume(v) or
  // resumeLater(v), and yields v. One coroutine at a time.
  auto park() {
    return boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void(bool)>(
        [this](Handler handler) {
          handler_.emplace(std::move(handler));
          list_->link(*this);
        },
        boost::asio::use_awaitable);
  }

  // Runs the parked coroutine now, on this stack, until it next suspends.
  // The caller must expect anything the coroutine may do meanwhile (its
  // session may close; it may park again).
  void resume(bool value) {
    Handler handler = take();
    std::move(handler)(value);
  }

  // Runs the parked coroutine from the scheduler, after the caller returns.
  void resumeLater(bool value) {
    Handler handler = take();
    auto executor = handler.get_executor();
    boost::asio::post(
        executor, [handler = std::move(handler), value]() mutable { std::move(handler)(value); });
  }

 private:
  friend class ParkedInputs;
  Handler take() {
    list_->unlink(*this);
    Handler handler = std::move(*handler_);
    handler_.reset();
    return handler;
  }

  ParkedInputs* list_;
  std::optional<Handler> handler_;
  InputPark* prev_ = nullptr;
  InputPark* next_ = nullptr;
};

inline void ParkedInputs::link(InputPark& p) {
  p.prev_ = nullptr;
  p.next_ = head_;
  if (head_) head_->prev_ = &p;
  head_ = &p;
}

inline void ParkedInputs::unlink(InputPark& p) {
  if (p.prev_) {
    p.prev_->next_ = p.next_;
  } else {
    head_ = p.next_;
  }
  if (p.next_) p.next_->prev_ = p.prev_;
  p.prev_ = p.next_ = nullptr;
}

// The context is going away: what is still parked is destroyed (its
// coroutine's frames are freed through the context, which is still there).
inline void ParkedInputs::shutdown() {
  while (head_) {
    InputPark* p = head_;
    InputPark::Handler dropped = p->take();
  }
}

}  // namespace relay::net
