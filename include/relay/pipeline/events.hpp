// The relay event stream: what the gateway is doing right now, one JSON event
// per step (a request routed, retried, failed over, answered, rate-limited or
// stopped by a budget; an upstream ejected or restored; an MCP session opened
// or closed), for operators to `curl -N` at GET /v1/events (docs/operations.md).
//
// Producers (any worker) call publish(); it costs one relaxed atomic load
// when nobody subscribes, so the request path pays nothing then. With
// subscribers, an event is formatted once, kept in a ring of the last
// kRingEvents (for Last-Event-ID), and appended to each matching
// subscriber's queue. Every queue is bounded (kQueueEvents): a slow reader
// loses the oldest events — and is told how many — but never slows a request.
// At most kMaxSubscribersPerKey streams per key (the admin's counted apart).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace relay::pipeline {

// One event as producers describe it. Text fields are names and ids (never
// a secret); empty ones are left out of the JSON.
struct RelayEvent {
  std::string_view kind;  // "request.routed", "upstream.ejected", ...
  std::string_view requestId;
  std::string_view traceId;  // W3C trace id of the request (docs/tracing.md)
  std::string_view key;      // the caller's key name: whose stream sees it
  std::string_view node;
  std::string_view model;
  std::string_view upstream;
  std::string_view server;  // an MCP server
  std::string_view reason;  // why: a failure class, a limit, ...
  std::string_view from, to;
  std::string_view message;
  std::string_view region;
  std::string_view strategy;
  std::optional<std::int64_t> attempt, status, delayMs, latencyMs, ttftMs, promptTokens,
      completionTokens, retryAfterMs;
  std::optional<double> costUsd, score, usedFraction;
};

// Which events a subscriber wants.
struct EventFilter {
  std::string key;       // "" = every key (the admin key only)
  bool admin = false;    // sees every event, also those of no key
  std::string kind;      // prefix: "request." or "upstream.ejected"; "" = all
  std::string node;      // "" = all
  std::string upstream;  // "" = all
  std::string server;    // an MCP server; "" = all
  bool matches(const struct StoredEvent& e) const;
};

struct StoredEvent {
  std::uint64_t id = 0;
  std::string kind, key, node, upstream, server;
  std::string frame;  // "id: N\nevent: KIND\ndata: {...}\n\n"
};

class EventBus;

// One subscriber's bounded queue. Thread-safe: the bus fills it from any
// worker; the subscriber drains it on its own.
class EventSubscription {
 public:
  // Moves out what is queued, in order, with an "events.dropped" frame first
  // when events were lost since the last take.
  std::string take();
  bool empty() const;
  // The gateway is draining: the stream should end.
  bool closed() const;
  // Set by the bus when it queues something (for a waiting subscriber to poll).
  std::atomic<bool> pending{false};
  ~EventSubscription();

 private:
  friend class EventBus;
  EventSubscription(EventBus& bus, EventFilter filter) : bus_(bus), filter_(std::move(filter)) {}
  EventBus& bus_;
  const EventFilter filter_;
  mutable std::mutex mutex_;
  std::deque<std::shared_ptr<const StoredEvent>> queue_;
  std::uint64_t dropped_ = 0;
  std::uint64_t lastId_ = 0;
};

class EventBus {
 public:
  static constexpr std::size_t kRingEvents = 4096;
  static constexpr std::size_t kQueueEvents = 1024;
  static constexpr std::size_t kMaxSubscribersPerKey = 8;
  static constexpr std::size_t kMaxAdminSubscribers = 32;

  // Events are kept while anyone subscribes, and for kLingerMs after the
  // last one left (so a client that reconnects with Last-Event-ID finds
  // what happened meanwhile); otherwise producers skip building them.
  static constexpr std::int64_t kLingerMs = 60'000;
  bool active() const;
  void publish(const RelayEvent& event);

  // A new stream, primed with the ring's events after `lastEventId` (the
  // reconnecting client's Last-Event-ID). nullptr when the key has
  // kMaxSubscribersPerKey streams open already (counted).
  std::shared_ptr<EventSubscription> subscribe(EventFilter filter,
                                               std::optional<std::uint64_t> lastEventId);

  // A drain began: open streams end, so they do not hold it up.
  void close() { closed_.store(true, std::memory_order_relaxed); }
  bool closed() const { return closed_.load(std::memory_order_relaxed); }

 private:
  friend class EventSubscription;
  void unsubscribe(EventSubscription* sub);
  void deliver(EventSubscription& sub, const std::shared_ptr<const StoredEvent>& event);

  std::atomic<std::size_t> subscribers_{0};
  std::atomic<std::int64_t> lingerUntilMs_{0};
  std::atomic<bool> closed_{false};
  std::mutex mutex_;
  std::uint64_t nextId_ = 1;
  std::deque<std::shared_ptr<const StoredEvent>> ring_;
  std::vector<EventSubscription*> subs_;
};

}  // namespace relay::pipeline
