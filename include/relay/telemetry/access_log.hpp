// The JSON access log: one line per request, written off the request path.
//
// write() appends the line to its thread's batch (an uncontended lock and a
// copy); a full batch, or every `flushEvery`, goes to spdlog's async logger as
// one message, and its writer thread hands it to the OS. So the request path
// pays neither a queue wake-up nor a write(2) per line, and a line reaches the
// file within `flushEvery`, or at flush() / destruction. Lines of one thread
// keep their order; lines of different threads interleave by batch (each line
// carries its own time).
// When the queue is full (the disk stalls), a batch is dropped and its lines
// counted (kimi_relay_limit_hits_total{limit="access_log_dropped"}): a worker
// must never wait for a disk. The queue (queueBatches x batchBytes, 8 MiB by
// default) absorbs ordinary bursts.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "relay/config/config.hpp"
#include "relay/telemetry/cost.hpp"
#include "relay/telemetry/record.hpp"

namespace relay::telemetry {

struct AccessLogOptions {
  std::size_t batchBytes = 32 * 1024;         // a thread's lines leave in batches this big
  std::size_t queueBatches = 256;             // batches waiting for the writer thread
  std::chrono::milliseconds flushEvery{500};  // longest a line waits before it is written
};

class AccessLog {
 public:
  // `target` is "stdout" or a file path (appended to, created if missing).
  // Throws std::runtime_error naming the path when the file cannot be opened.
  explicit AccessLog(const std::string& target, AccessLogOptions options = {});
  // nullptr when `log.accessLog` is "" (the access log is off).
  static std::unique_ptr<AccessLog> open(const config::Log& log, AccessLogOptions options = {});

  // Writes every queued line out, then stops the writer thread.
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  // Queues one line (without its newline). Thread-safe.
  void write(std::string_view line);

  // Returns once every line written before the call (by any thread) has been
  // handed to the OS. For shutdown and tests; thread-safe.
  void flush();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Appends the JSON object of one request (no newline): time (RFC 3339 UTC,
// milliseconds), request_id, key, model, upstream, node, status, attempts,
// duration_ms, ttft_ms, upstream_ms, prompt_tokens, cached_tokens,
// completion_tokens, usage_estimated, cost_usd, priced, [cost, currency when
// the display currency is not USD], error_code, fallback_model, protocol,
// stream. Absent values are null. Text fields are escaped, invalid UTF-8 is
// replaced by U+FFFD and each is cut to 256 bytes, so any input gives one
// valid JSON line.
void appendAccessLine(std::string& out, const RequestRecord& record, const Settlement& settled,
                      std::string_view nodeLabel, const DisplayCurrency& currency,
                      std::chrono::system_clock::time_point at);

// Appends `t` as "2025-01-31T12:34:56.789Z".
void appendRfc3339Millis(std::string& out, std::chrono::system_clock::time_point t);

}  // namespace relay::telemetry
