// ResponseStream's read in steps (readNow, waitMore, readAfter), as the SSE
// relay loops over a stream: a stream that only implements read() gives the
// same bytes and the same end through the default steps as through read().
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "relay/upstream/client.hpp"

namespace relay::upstream {
namespace {

// Gives its pieces one per read(), then false (failing when told to).
class PiecesStream final : public ResponseStream {
 public:
  PiecesStream(std::vector<std::string> pieces, bool fails)
      : pieces_(std::move(pieces)), fails_(fails) {}
  int status() const override { return 200; }
  const Headers& headers() const override { return headers_; }
  net::Task<bool> read(std::string& out) override {
    ++reads;
    if (next_ == pieces_.size()) {
      if (fails_) failure_.kind = FailureKind::kReset;
      co_return false;
    }
    out += pieces_[next_++];
    co_return true;
  }
  bool complete() const override { return next_ == pieces_.size() && !fails_; }
  net::Task<bool> readAll(std::string& out, std::uint64_t) override {
    while (co_await read(out)) {
    }
    co_return !failure_;
  }
  const Failure& failure() const override { return failure_; }
  void abort() override {}

  int reads = 0;

 private:
  std::vector<std::string> pieces_;
  bool fails_;
  std::size_t next_ = 0;
  Headers headers_;
  Failure failure_;
};

// The relay's loop: every piece it read, and the answer that ended it.
struct Relayed {
  std::vector<std::string> pieces;
  bool lastAnswer = true;
};

net::Task<void> relayInSteps(ResponseStream& s, Relayed& r) {
  for (;;) {
    std::string chunk;
    std::optional<bool> more = s.readNow(chunk);
    while (!more) {
      net::Task<ResponseStream::ReadWait> wait = s.waitMore(chunk, Clock::now());
      const ResponseStream::ReadWait got = co_await std::move(wait);
      more = s.readAfter(got, chunk);
    }
    if (!*more) {
      r.lastAnswer = false;
      co_return;
    }
    r.pieces.push_back(chunk);
  }
}

Relayed run(ResponseStream& s) {
  boost::asio::io_context io;
  Relayed r;
  boost::asio::co_spawn(io, relayInSteps(s, r), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();
  return r;
}

TEST(ReadSteps, AStreamWithOnlyReadGivesEveryPieceThroughTheDefaultSteps) {
  PiecesStream s({"data: 1\n\n", "data: 2\n\n", "data: [DONE]\n\n"}, false);
  const Relayed r = run(s);
  EXPECT_EQ(r.pieces, (std::vector<std::string>{"data: 1\n\n", "data: 2\n\n", "data: [DONE]\n\n"}));
  EXPECT_FALSE(r.lastAnswer);
  EXPECT_EQ(s.reads, 4);  // one read() per step, the last one the end
  EXPECT_FALSE(s.failure());
}

TEST(ReadSteps, AFailureEndsTheStepsAsItEndsRead) {
  PiecesStream s({"data: 1\n\n"}, true);
  const Relayed r = run(s);
  EXPECT_EQ(r.pieces, std::vector<std::string>{"data: 1\n\n"});
  EXPECT_FALSE(r.lastAnswer);
  EXPECT_EQ(s.failure().kind, FailureKind::kReset);
}

}  // namespace
}  // namespace relay::upstream
