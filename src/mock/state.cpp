#include "state.hpp"

#include <chrono>

#include <nlohmann/json.hpp>

namespace relay::mock {

std::uint64_t MockState::beginExchange() {
  requests_.fetch_add(1, std::memory_order_relaxed);
  std::int64_t now = inFlight_.fetch_add(1, std::memory_order_relaxed) + 1;
  std::int64_t seenMax = maxInFlight_.load(std::memory_order_relaxed);
  while (now > seenMax &&
         !maxInFlight_.compare_exchange_weak(seenMax, now, std::memory_order_relaxed)) {
  }
  return sequence_.fetch_add(1, std::memory_order_relaxed) + 1;
}

void MockState::endExchange(bool cancelled, bool completedStream) {
  inFlight_.fetch_sub(1, std::memory_order_relaxed);
  if (cancelled) cancelled_.fetch_add(1, std::memory_order_relaxed);
  if (completedStream) completedStreams_.fetch_add(1, std::memory_order_relaxed);
}

void MockState::record(RecordedRequest request) {
  std::lock_guard lock(recordsMutex_);
  if (records_.size() == kMaxRecords) records_.pop_front();
  records_.push_back(std::move(request));
}

std::string MockState::requestsJson() const {
  nlohmann::json list = nlohmann::json::array();
  {
    std::lock_guard lock(recordsMutex_);
    for (const RecordedRequest& r : records_) {
      nlohmann::json headers = nlohmann::json::array();
      for (const auto& [name, value] : r.headers)
        headers.push_back(nlohmann::json::array({name, value}));
      list.push_back({{"method", r.method},
                      {"path", r.path},
                      {"query", r.query},
                      {"protocol", r.protocol},
                      {"headers", std::move(headers)},
                      {"body", r.body},
                      {"time_ms", r.timeMs}});
    }
  }
  // A body need not be UTF-8; replace bad bytes rather than fail the dump.
  return list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void MockState::clearRequests() {
  std::lock_guard lock(recordsMutex_);
  records_.clear();
}

std::string MockState::statsJson() const {
  nlohmann::json stats = {{"requests", requests_.load()},
                          {"in_flight", inFlight_.load()},
                          {"max_in_flight", maxInFlight_.load()},
                          {"cancelled", cancelled_.load()},
                          {"completed_streams", completedStreams_.load()}};
  return stats.dump();
}

void MockState::resetStats() {
  requests_ = 0;
  cancelled_ = 0;
  completedStreams_ = 0;
  maxInFlight_ = inFlight_.load();
}

void MockState::setFault(std::optional<RunWideFault> fault) {
  std::lock_guard lock(faultMutex_);
  fault_ = std::move(fault);
  faultArmed_.store(fault_.has_value(), std::memory_order_release);
}

std::optional<FaultSpec> MockState::takeFault() {
  if (!faultArmed_.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard lock(faultMutex_);
  if (!fault_) return std::nullopt;
  FaultSpec spec = fault_->spec;
  if (fault_->remaining && --*fault_->remaining == 0) {
    fault_.reset();
    faultArmed_.store(false, std::memory_order_release);
  }
  return spec;
}

std::optional<RunWideFault> MockState::currentFault() const {
  std::lock_guard lock(faultMutex_);
  return fault_;
}

double nowUnixMs() {
  auto since = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(since).count()) /
         1000.0;
}

}  // namespace relay::mock
