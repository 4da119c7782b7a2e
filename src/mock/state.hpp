// What the mock remembers across requests and worker threads: the recorded
// requests, the counters tests assert on, and the run-wide fault.
//
// Counters are atomics: every /v1 request touches them, and a lock there would
// be the only contention between workers in a benchmark. The record list and
// the run-wide fault change rarely or can be switched off (`--no-record`), so a
// mutex guards them. The fault has an atomic "armed" flag so that a request
// takes no lock at all while no run-wide fault is set.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fault.hpp"

namespace relay::mock {

struct RecordedRequest {
  std::string method;
  std::string path;
  std::string query;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string protocol;  // "http/1.1" or "h2"
  double timeMs = 0;     // arrival, Unix epoch milliseconds (microsecond resolution)
};

struct RunWideFault {
  FaultSpec spec;
  std::optional<std::uint32_t> remaining;  // requests left; nullopt = until cleared
};

class MockState {
 public:
  static constexpr std::size_t kMaxRecords = 1000;

  explicit MockState(bool recording) : recording_(recording) {}

  // Counts one /v1 exchange in; returns its sequence number (1, 2, ...) which
  // also makes completion ids unique across workers.
  std::uint64_t beginExchange();
  // `cancelled`: the client went away before the exchange finished.
  void endExchange(bool cancelled, bool completedStream);

  bool recording() const { return recording_; }
  void record(RecordedRequest request);
  std::string requestsJson() const;
  void clearRequests();

  std::string statsJson() const;
  // Zeroes the counters; in_flight keeps counting live exchanges and
  // max_in_flight restarts from it.
  void resetStats();

  void setFault(std::optional<RunWideFault> fault);
  // The run-wide fault for the next request, consuming one of its `times`.
  std::optional<FaultSpec> takeFault();
  std::optional<RunWideFault> currentFault() const;

 private:
  const bool recording_;

  std::atomic<std::uint64_t> sequence_{0};
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::int64_t> inFlight_{0};
  std::atomic<std::int64_t> maxInFlight_{0};
  std::atomic<std::uint64_t> cancelled_{0};
  std::atomic<std::uint64_t> completedStreams_{0};

  mutable std::mutex recordsMutex_;
  std::deque<RecordedRequest> records_;

  std::atomic<bool> faultArmed_{false};
  mutable std::mutex faultMutex_;
  std::optional<RunWideFault> fault_;
};

// Now as Unix epoch milliseconds with a fractional part.
double nowUnixMs();

}  // namespace relay::mock
