#include "relay/telemetry/access_log.hpp"

#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/base_sink.h>

#include "relay/common/limits.hpp"

namespace relay::telemetry {
namespace {

// Writes each message's payload — a batch of finished lines, each ending in
// '\n' — to a stdio stream as is: no formatting and no flush per message
// (spdlog's stdout sink flushes every message: one write(2) each).
class BatchSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  BatchSink(std::FILE* file, bool owned) : file_(file), owned_(owned) {}

  // Batches queued and not yet written (the producers' side of the bound).
  std::atomic<std::size_t> queued{0};
  ~BatchSink() override {
    std::fflush(file_);
    if (owned_) std::fclose(file_);
  }

  // Blocks until `count` flushes have completed.
  void waitFlushes(std::uint64_t count) {
    std::unique_lock lock(doneMutex_);
    done_.wait(lock, [&] { return flushesDone_ >= count; });
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::fwrite(msg.payload.data(), 1, msg.payload.size(), file_);
    queued.fetch_sub(1, std::memory_order_relaxed);
  }
  void flush_() override {
    std::fflush(file_);
    {
      std::lock_guard lock(doneMutex_);
      ++flushesDone_;
    }
    done_.notify_all();
  }

 private:
  std::FILE* file_;
  bool owned_;
  std::mutex doneMutex_;
  std::condition_variable done_;
  std::uint64_t flushesDone_ = 0;
};

std::FILE* openTarget(const std::string& target, bool& owned) {
  if (target == "stdout") {
    owned = false;
    return stdout;
  }
  std::FILE* f = std::fopen(target.c_str(), "ab");
  if (!f) {
    throw std::runtime_error("access log: cannot open " + target + ": " + std::strerror(errno));
  }
  owned = true;
  std::setvbuf(f, nullptr, _IOFBF, 1 << 16);
  return f;
}

// Each thread writes to its own shard (threads are numbered on first use and
// spread round-robin), so workers do not contend; a shard's mutex only ever
// meets the periodic drain.
constexpr std::size_t kShards = 16;
std::size_t threadShard() {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t mine = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return mine;
}

}  // namespace

struct AccessLog::Impl {
  // Lines gather per shard and leave as one spdlog message per batch: the
  // queue, its lock and the writer's wake-up are paid per batch, not per line
  // (nginx's `access_log ... buffer= flush=` does the same per worker).
  // Lines of one thread stay in order; across threads, order is by batch.
  struct alignas(64) Shard {
    std::mutex mutex;
    std::string lines;
  };
  std::array<Shard, kShards> shards;
  std::size_t batchBytes = 0;

  std::shared_ptr<BatchSink> sink;
  std::shared_ptr<spdlog::details::thread_pool> pool;
  std::shared_ptr<spdlog::async_logger> logger;

  // Flush tickets. The writer thread handles messages in queue order, so once
  // flush number n has completed, every batch queued before it is out.
  // Invariant: the sink is flushed only through postFlush() while the logger
  // lives, so the sink's count of completed flushes matches the tickets.
  std::mutex postMutex;
  std::uint64_t flushesPosted = 0;

  // The periodic drain, so a quiet gateway's lines do not sit in a shard.
  std::mutex timerMutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread timer;

  std::size_t maxQueued = 0;  // batches; the rest of the queue is kept for flush tickets

  // Queues a batch, or drops it (counted per line) when the writer is that
  // far behind: the request path never waits for the disk.
  void send(std::string& batch) {
    if (sink->queued.fetch_add(1, std::memory_order_relaxed) >= maxQueued) {
      sink->queued.fetch_sub(1, std::memory_order_relaxed);
      std::uint64_t lines = 0;
      for (char c : batch) lines += c == '\n';
      countLimit(Limit::kAccessLogDropped, lines);
      batch.clear();
      return;
    }
    logger->log(spdlog::level::info, spdlog::string_view_t(batch.data(), batch.size()));
    batch.clear();
  }

  // Moves every shard's lines to the queue.
  void drain() {
    std::string batch;
    for (Shard& s : shards) {
      {
        std::lock_guard lock(s.mutex);
        if (s.lines.empty()) continue;
        batch.swap(s.lines);
        s.lines.reserve(batchBytes + 1024);
      }
      send(batch);
    }
  }

  std::uint64_t postFlush() {
    std::lock_guard lock(postMutex);
    logger->flush();
    return ++flushesPosted;
  }
};

AccessLog::AccessLog(const std::string& target, AccessLogOptions options)
    : impl_(std::make_unique<Impl>()) {
  bool owned = false;
  std::FILE* file = openTarget(target, owned);
  impl_->batchBytes = options.batchBytes;
  // Flush tickets take a queue slot each; a few are always left for them,
  // so the queue itself never fills and never blocks a producer.
  impl_->maxQueued = options.queueBatches > 16 ? options.queueBatches - 8 : options.queueBatches / 2;
  impl_->sink = std::make_shared<BatchSink>(file, owned);
  // One writer thread: batches leave in the order they were queued.
  impl_->pool = std::make_shared<spdlog::details::thread_pool>(options.queueBatches, 1);
  impl_->logger = std::make_shared<spdlog::async_logger>("access", impl_->sink, impl_->pool,
                                                         spdlog::async_overflow_policy::block);
  impl_->logger->set_level(spdlog::level::info);
  impl_->logger->flush_on(spdlog::level::off);
  impl_->timer = std::thread([impl = impl_.get(), every = options.flushEvery] {
    std::unique_lock lock(impl->timerMutex);
    while (!impl->wake.wait_for(lock, every, [impl] { return impl->stopping; })) {
      impl->drain();
      impl->postFlush();
    }
  });
}

std::unique_ptr<AccessLog> AccessLog::open(const config::Log& log, AccessLogOptions options) {
  if (log.accessLog.empty()) return nullptr;
  return std::make_unique<AccessLog>(log.accessLog, options);
}

AccessLog::~AccessLog() {
  {
    std::lock_guard lock(impl_->timerMutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_one();
  impl_->timer.join();
  impl_->drain();
  impl_->logger.reset();
  impl_->pool.reset();  // writes every queued batch, then joins its thread
  impl_->sink->flush();
}

void AccessLog::write(std::string_view line) {
  Impl::Shard& shard = impl_->shards[threadShard()];
  std::string full;
  {
    std::lock_guard lock(shard.mutex);
    shard.lines.append(line);
    shard.lines.push_back('\n');
    if (shard.lines.size() < impl_->batchBytes) return;
    full.swap(shard.lines);
    shard.lines.reserve(impl_->batchBytes + 1024);
  }
  impl_->send(full);  // outside the shard lock
}

void AccessLog::flush() {
  impl_->drain();
  impl_->sink->waitFlushes(impl_->postFlush());
}

}  // namespace relay::telemetry
