// The Lua scripts that keep every replica's admission state in Redis (private
// to cluster/). Each runs atomically in Redis with Redis's own clock (TIME),
// so replicas never compare their clocks. Keys of one API key share the hash
// tag {name}; docs/operations.md "Shared state" lists them.
//
// admit  — one round trip per request: purges expired leases, then checks
//          budget, the request and token buckets and the concurrency slots
//          without side effects, and only if all pass takes from each and
//          writes the request's lease (ledger entry + expiry).
// settle — the request's lease becomes its real usage: refunds or charges
//          the token bucket, moves the budget hold to the real cost, frees
//          the slot. Applied once per lease id: a repeated settle finds no
//          ledger entry and changes nothing.
// charge — spend of a request admitted by a replica's local fallback while
//          Redis was unreachable, replayed when it returns (once per id).
// renew  — pushes a running request's lease expiry forward.
// floor  — raises a key's spend in Redis to what a replica knows (sent for
//          every budgeted key when a connection comes up, after the replayed
//          settlements: a Redis that restarted empty does not hand spent
//          budgets back).
#pragma once

#include <string_view>

namespace relay::cluster {

struct Script {
  std::string_view name;
  std::string_view source;
};

extern const Script kAdmitScript;
extern const Script kSettleScript;
extern const Script kChargeScript;
extern const Script kRenewScript;
extern const Script kFloorScript;

// Admit reply, element 1: 0 admitted, else why not.
enum class AdmitStatus : int {
  kAdmitted = 0,
  kRequests = 1,
  kTokens = 2,
  kTooLarge = 3,
  kConcurrency = 4,
  kBudgetUsd = 5,
  kBudgetInput = 6,
  kBudgetOutput = 7,
};

}  // namespace relay::cluster
