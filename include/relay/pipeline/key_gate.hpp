// The gate every request of a key passes before it goes upstream: the key's
// request and token buckets, its concurrency slots and its budget, decided
// together and settled together. One interface, two implementations:
//
//  - LocalKeyGate: this process's own state (admission/key_limiter.hpp,
//    admission/budget.hpp) — every limit exact within the process;
//  - RedisKeyGate (cluster/redis_gate.hpp): one round trip to Redis that
//    decides for every replica sharing it, falling back to a local gate when
//    Redis is slow or gone (cluster.on_redis_failure).
//
// The pipeline asks for a ticket and settles it with the real usage; it never
// knows which gate it has.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "relay/admission/budget.hpp"
#include "relay/admission/key_store.hpp"
#include "relay/admission/rate_limit_headers.hpp"
#include "relay/common/headers.hpp"
#include "relay/net/exchange.hpp"
#include "relay/pipeline/respond.hpp"
#include "relay/telemetry/record.hpp"

namespace relay::pipeline {

struct Snapshot;

// What one request asks of its key.
struct GateAsk {
  const admission::Tenant* tenant = nullptr;
  std::uint64_t tokens = 0;     // tpm reservation (prompt estimate + completion cap)
  admission::BudgetAsk budget;  // the most it may cost
  bool holdSlot = true;         // a concurrency slot while it runs (not for an MCP GET stream)
  // No cost of its own (MCP): refused only once the budget is spent.
  bool refuseWhenSpent = false;
};

// Called with the share of a budget cap now spent when a settlement carried
// the key's spend across 80 % of it (for the event stream). A shared gate
// learns it from Redis's reply, after settle() has returned.
using BudgetCrossed = std::function<void(double usedFraction)>;

// An admitted request's hold on its key. Settle once with the real usage;
// dropped unsettled, it settles with what setUsedSoFar() last said (the
// whole token reservation until then, and no cost).
class GateTicket {
 public:
  virtual ~GateTicket() = default;
  virtual void setUsedSoFar(std::uint64_t tokens, const admission::BudgetAsk& cost) = 0;
  virtual void settle(std::uint64_t tokens, const admission::BudgetAsk& cost,
                      BudgetCrossed crossed) = 0;
};

struct GateResult {
  std::unique_ptr<GateTicket> ticket;  // set when admitted
  std::optional<ApiError> refusal;     // 429 (or 503 from a shared gate that cannot decide)
  std::optional<telemetry::RefusalReason> reason;
  // The key's x-ratelimit-* fields, refusals included: values, no heap (the
  // answer's Headers takes them with appendTo()).
  admission::RateLimitHeaders rateHeaders;
};

class KeyGate {
 public:
  virtual ~KeyGate() = default;
  // `snapshot` stays alive while the ticket does (the exchange holds it);
  // `ask` until the call completes.
  virtual net::Task<GateResult> admit(const Snapshot& snapshot, const GateAsk& ask) = 0;
  // admit()'s answer when the gate has it without waiting; nullopt: call admit().
  virtual std::optional<GateResult> admitNow(const Snapshot& /*snapshot*/, const GateAsk& /*ask*/) {
    return std::nullopt;
  }
  // The key's x-ratelimit-* fields without admitting anything (answers made
  // before admission, such as a body error, still carry them).
  virtual void appendRateHeaders(const Snapshot& snapshot, const admission::Tenant& tenant,
                                 Headers& out) = 0;
  // At exit, on the worker's loop: closes what the gate holds open.
  virtual void stop() {}
  // Settlements sent and not yet confirmed (any thread): a drain waits a
  // moment for them before the loops stop.
  virtual std::size_t unsettled() const { return 0; }
};

// The process's own state: the snapshot's limiters and budgets.
class LocalKeyGate final : public KeyGate {
 public:
  net::Task<GateResult> admit(const Snapshot& snapshot, const GateAsk& ask) override;
  std::optional<GateResult> admitNow(const Snapshot& snapshot, const GateAsk& ask) override {
    return decide(snapshot, ask);
  }
  void appendRateHeaders(const Snapshot& snapshot, const admission::Tenant& tenant,
                         Headers& out) override;
  // The same decision, synchronously (the shared gate's fallback calls it).
  static GateResult decide(const Snapshot& snapshot, const GateAsk& ask);
};

}  // namespace relay::pipeline
