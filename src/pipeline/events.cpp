#include "relay/pipeline/events.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <utility>

#include "relay/common/json_write.hpp"
#include "relay/common/limits.hpp"

namespace relay::pipeline {
namespace {

void field(std::string& out, std::string_view name, std::string_view value) {
  if (value.empty()) return;
  out += ",\"";
  out += name;
  out += "\":";
  appendJsonString(out, value);
}

void field(std::string& out, std::string_view name, std::optional<std::int64_t> value) {
  if (!value) return;
  out += ",\"";
  out += name;
  out += "\":";
  out += std::to_string(*value);
}

void field(std::string& out, std::string_view name, std::optional<double> value) {
  if (!value || !std::isfinite(*value)) return;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", *value);
  out += ",\"";
  out += name;
  out += "\":";
  out += buf;
}

std::string isoNow() {
  using namespace std::chrono;
  auto now = system_clock::now();
  std::time_t t = system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[80];  // room for any int in each field: no truncation to reason about
  auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(ms));
  return buf;
}

std::shared_ptr<const StoredEvent> format(std::uint64_t id, const RelayEvent& e) {
  auto out = std::make_shared<StoredEvent>();
  out->id = id;
  out->kind = std::string(e.kind);
  out->key = std::string(e.key);
  out->node = std::string(e.node);
  out->upstream = std::string(e.upstream.empty() ? e.from : e.upstream);
  out->server = std::string(e.server);
  std::string json = "{\"id\":" + std::to_string(id) + ",\"time\":\"" + isoNow() + "\"";
  field(json, "kind", e.kind);
  field(json, "request_id", e.requestId);
  field(json, "trace_id", e.traceId);
  field(json, "key", e.key);
  field(json, "node", e.node);
  field(json, "model", e.model);
  field(json, "upstream", e.upstream);
  field(json, "region", e.region);
  field(json, "server", e.server);
  field(json, "attempt", e.attempt);
  field(json, "from", e.from);
  field(json, "to", e.to);
  field(json, "reason", e.reason);
  field(json, "strategy", e.strategy);
  field(json, "score", e.score);
  field(json, "delay_ms", e.delayMs);
  field(json, "retry_after_ms", e.retryAfterMs);
  field(json, "status", e.status);
  field(json, "latency_ms", e.latencyMs);
  field(json, "ttft_ms", e.ttftMs);
  field(json, "prompt_tokens", e.promptTokens);
  field(json, "completion_tokens", e.completionTokens);
  field(json, "cost_usd", e.costUsd);
  field(json, "used_fraction", e.usedFraction);
  field(json, "message", e.message);
  json += '}';
  out->frame = "id: " + std::to_string(id) + "\nevent: " + out->kind + "\ndata: " + json + "\n\n";
  return out;
}

std::int64_t coarseMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

}  // namespace

bool EventBus::active() const {
  if (subscribers_.load(std::memory_order_relaxed) > 0) return true;
  std::int64_t until = lingerUntilMs_.load(std::memory_order_relaxed);
  return until != 0 && coarseMs() < until;
}

bool EventFilter::matches(const StoredEvent& e) const {
  if (!admin && e.key != key) return false;
  if (admin && !key.empty() && e.key != key) return false;
  if (!kind.empty() && !e.kind.starts_with(kind)) return false;
  if (!node.empty() && e.node != node) return false;
  if (!upstream.empty() && e.upstream != upstream) return false;
  if (!server.empty() && e.server != server) return false;
  return true;
}

std::string EventSubscription::take() {
  std::deque<std::shared_ptr<const StoredEvent>> events;
  std::uint64_t dropped = 0;
  {
    std::lock_guard lock(mutex_);
    events.swap(queue_);
    dropped = std::exchange(dropped_, 0);
    pending.store(false, std::memory_order_relaxed);
  }
  std::string out;
  if (dropped > 0) {
    out = "event: events.dropped\ndata: {\"kind\":\"events.dropped\",\"count\":" +
          std::to_string(dropped) +
          ",\"message\":\"this stream fell behind and lost events; read faster or filter "
          "(kind=, node=, upstream=)\"}\n\n";
  }
  for (const auto& e : events)
    out += e->frame;
  return out;
}

bool EventSubscription::empty() const {
  std::lock_guard lock(mutex_);
  return queue_.empty() && dropped_ == 0;
}

bool EventSubscription::closed() const {
  return bus_.closed();
}

EventSubscription::~EventSubscription() {
  bus_.unsubscribe(this);
}

void EventBus::deliver(EventSubscription& sub, const std::shared_ptr<const StoredEvent>& event) {
  if (!sub.filter_.matches(*event)) return;
  std::lock_guard lock(sub.mutex_);
  if (event->id <= sub.lastId_) return;  // already primed from the ring
  if (sub.queue_.size() >= kQueueEvents) {
    sub.queue_.pop_front();
    ++sub.dropped_;
    countLimit(Limit::kEventsDropped);
  }
  sub.queue_.push_back(event);
  sub.lastId_ = event->id;
  sub.pending.store(true, std::memory_order_relaxed);
}

void EventBus::publish(const RelayEvent& event) {
  if (!active()) return;
  std::lock_guard lock(mutex_);
  auto stored = format(nextId_++, event);
  ring_.push_back(stored);
  if (ring_.size() > kRingEvents) ring_.pop_front();
  for (EventSubscription* sub : subs_)
    deliver(*sub, stored);
}

std::shared_ptr<EventSubscription> EventBus::subscribe(EventFilter filter,
                                                       std::optional<std::uint64_t> lastEventId) {
  std::lock_guard lock(mutex_);
  std::size_t same = 0;
  for (EventSubscription* s : subs_) {
    if (s->filter_.admin == filter.admin && (filter.admin || s->filter_.key == filter.key)) ++same;
  }
  if (same >= (filter.admin ? kMaxAdminSubscribers : kMaxSubscribersPerKey)) {
    countLimit(Limit::kEventSubscribers);
    return nullptr;
  }
  std::shared_ptr<EventSubscription> sub(new EventSubscription(*this, std::move(filter)));
  if (lastEventId) {
    // Resume: what the ring still holds after that id; a gap (the ring moved
    // on) is reported as dropped events.
    if (!ring_.empty() && ring_.front()->id > *lastEventId + 1) {
      sub->dropped_ = ring_.front()->id - *lastEventId - 1;
    }
    for (const auto& e : ring_) {
      if (e->id > *lastEventId) deliver(*sub, e);
    }
  }
  sub->lastId_ = std::max(sub->lastId_, nextId_ - 1);
  subs_.push_back(sub.get());
  subscribers_.fetch_add(1, std::memory_order_relaxed);
  return sub;
}

void EventBus::unsubscribe(EventSubscription* sub) {
  std::lock_guard lock(mutex_);
  auto it = std::find(subs_.begin(), subs_.end(), sub);
  if (it == subs_.end()) return;
  subs_.erase(it);
  if (subscribers_.fetch_sub(1, std::memory_order_relaxed) == 1)
    lingerUntilMs_.store(coarseMs() + kLingerMs, std::memory_order_relaxed);
}

}  // namespace relay::pipeline
