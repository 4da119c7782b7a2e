// Passive health of one upstream: outlier ejection with a half-open probe, as
// a circuit breaker. Shared by every worker; one 64-bit atomic state word,
// changed only by CAS, so a transition happens exactly once however many
// workers race to make it.
//
//   healthy --(eject_after_failures consecutive failures)--> ejected
//   ejected --(ejection time over; ONE request claims the probe)--> half-open
//   half-open --(probe succeeds)--> healthy (counters reset)
//   half-open --(probe fails)--> ejected, for twice as long (up to max)
//
// Ejection n in a row lasts min(max, base * 2^(n-1)). A success while healthy
// resets the consecutive-failure count. Results of requests admitted before an
// ejection are ignored while ejected: only the probe decides.
//
// Every admission hands out a HealthTicket; reporting success or failure goes
// through it, and a ticket dropped without a report (the caller went away)
// gives the probe back, so a cancelled probe cannot leave an upstream half-open
// forever. A probe that never reports at all is presumed lost after
// `probeTimeout` and the next request probes instead.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "relay/upstream/time.hpp"

namespace relay::upstream {

struct HealthOptions {
  std::uint32_t ejectAfterFailures = 5;  // 0 = never eject
  Millis baseEjection{30'000};
  Millis maxEjection{300'000};
  Millis probeTimeout{600'000};  // at least the longest a request may take
};

enum class HealthStatus { kHealthy, kEjected, kHalfOpen };

enum class HealthPass {
  kRefused,  // ejected, or another request holds the probe
  kNormal,   // healthy
  kProbe,    // the one request that decides whether the circuit closes
  kForced,   // ejected, but chosen as the last resort of its pool
};

class HealthTracker;

// Move-only; must not outlive its tracker (both live for the request's config
// snapshot). Report at most once; later reports are ignored.
class HealthTicket {
 public:
  HealthTicket() = default;
  HealthTicket(HealthTicket&& other) noexcept { *this = std::move(other); }
  HealthTicket& operator=(HealthTicket&& other) noexcept;
  HealthTicket(const HealthTicket&) = delete;
  HealthTicket& operator=(const HealthTicket&) = delete;
  ~HealthTicket();

  HealthPass pass() const { return pass_; }
  explicit operator bool() const { return pass_ != HealthPass::kRefused; }

 private:
  friend class HealthTracker;
  HealthTicket(HealthTracker* tracker, HealthPass pass, std::uint64_t stamp)
      : tracker_(tracker), pass_(pass), stamp_(stamp) {}
  HealthTracker* tracker_ = nullptr;
  HealthPass pass_ = HealthPass::kRefused;
  std::uint64_t stamp_ = 0;  // kProbe: the probe deadline it was issued with
};

class HealthTracker {
 public:
  explicit HealthTracker(const HealthOptions& options = {});
  HealthTracker(const HealthTracker&) = delete;
  HealthTracker& operator=(const HealthTracker&) = delete;

  // For selection, without side effects: healthy, or its ejection is over and
  // no probe is in flight. `admit` may still refuse if another request wins
  // the probe in between.
  bool eligible(SteadyTime now) const;
  // Lets a request through: kNormal when healthy, kProbe for exactly one
  // request once the ejection is over, otherwise kRefused.
  HealthTicket admit(SteadyTime now);
  // The pool's last resort when every candidate is ejected (see pick.hpp):
  // always lets the request through. Its success closes the circuit; its
  // failure changes nothing (the upstream is already ejected).
  HealthTicket admitForced(SteadyTime now);

  // `ticket` is emptied; reporting twice has no effect.
  void onSuccess(HealthTicket& ticket, SteadyTime now);
  void onFailure(HealthTicket& ticket, SteadyTime now);
  // Neither (a 429, a cancelled request): gives a probe back untouched.
  void onNeutral(HealthTicket& ticket);
  // A failure found after the ticket was reported — a stream that broke after
  // its head said 200. Counts like any request's failure while healthy.
  void noteLateFailure(SteadyTime now);
  // Ejects at once, whatever the failure count: the upstream refused the
  // gateway's own credential, so every request to it will fail alike until an
  // operator fixes the key. Ejected or half-open already, or ejection off
  // (eject_after_failures: 0): nothing changes.
  void ejectNow(SteadyTime now);

  HealthStatus status(SteadyTime now) const;
  // When the current ejection ends (status kEjected); nullopt otherwise.
  std::optional<SteadyTime> ejectedUntil(SteadyTime now) const;
  std::uint32_t consecutiveFailures() const;
  std::uint64_t ejectionsTotal() const { return ejections_.load(std::memory_order_relaxed); }
  // When it was last ejected (the epoch if never): the pool's tie-breaker.
  SteadyTime lastEjectedAt() const;
  // The ejection time the n-th ejection in a row gets (n >= 1).
  Millis ejectionTime(unsigned n) const;

  // Tests only (a sync point, as in Envoy's ThreadSynchronizer): called in
  // admit() after the state was read and before the probe is claimed, so a
  // test can make two claimants read the same state and prove that only one
  // CAS wins. Set before any other thread uses the tracker. Only the rare
  // claim path (an ejection just ended) pays for the null check.
  using SyncPoint = void (*)(void* context);
  void setProbeClaimSyncPoint(SyncPoint hook, void* context) {
    probeClaimHook_ = hook;
    probeClaimContext_ = context;
  }

 private:
  friend class HealthTicket;
  void release(HealthTicket& ticket);
  std::uint64_t ejectedWord(std::uint64_t w, std::uint64_t nowMs) const;
  void countEjection(std::uint64_t nowMs);

  const HealthOptions options_;
  // phase | ejection streak | consecutive failures | deadline (ms): see health.cpp.
  std::atomic<std::uint64_t> word_{0};
  std::atomic<std::int64_t> lastEjectedMs_{0};
  std::atomic<std::uint64_t> ejections_{0};
  SyncPoint probeClaimHook_ = nullptr;
  void* probeClaimContext_ = nullptr;
};

}  // namespace relay::upstream
