#include "relay/upstream/health.hpp"

#include <algorithm>

namespace relay::upstream {
namespace {

// The state word, from the low bits up:
//   deadline  42 bits  ms on the steady clock (139 years): when the ejection
//                      ends (ejected) or when the probe is presumed lost (half-open)
//   phase      2 bits  healthy / ejected / half-open
//   streak     6 bits  ejections in a row, saturating at 63
//   failures  14 bits  consecutive failures while healthy, saturating
// Everything a transition reads and writes is in this one word, so a CAS
// makes each transition atomic without a lock.
constexpr int kDeadlineBits = 42;
constexpr int kPhaseShift = 42;
constexpr int kStreakShift = 44;
constexpr int kFailuresShift = 50;
constexpr std::uint64_t kDeadlineMask = (1ull << kDeadlineBits) - 1;
constexpr std::uint64_t kMaxStreak = 63;
constexpr std::uint64_t kMaxFailures = (1ull << 14) - 1;

enum Phase : std::uint64_t { kHealthy = 0, kEjected = 1, kHalfOpen = 2 };

struct State {
  std::uint64_t deadline = 0;
  std::uint64_t phase = kHealthy;
  std::uint64_t streak = 0;
  std::uint64_t failures = 0;
};

State decode(std::uint64_t w) {
  return State{w & kDeadlineMask, (w >> kPhaseShift) & 3, (w >> kStreakShift) & kMaxStreak,
               w >> kFailuresShift};
}

std::uint64_t encode(const State& s) {
  return (s.deadline & kDeadlineMask) | (s.phase << kPhaseShift) |
         (std::min(s.streak, kMaxStreak) << kStreakShift) |
         (std::min(s.failures, kMaxFailures) << kFailuresShift);
}

std::uint64_t clampMs(std::int64_t ms) {
  return static_cast<std::uint64_t>(std::clamp<std::int64_t>(ms, 0, kDeadlineMask));
}

}  // namespace

HealthTicket& HealthTicket::operator=(HealthTicket&& other) noexcept {
  if (this != &other) {
    if (tracker_) tracker_->release(*this);
    tracker_ = other.tracker_;
    pass_ = other.pass_;
    stamp_ = other.stamp_;
    other.tracker_ = nullptr;
    other.pass_ = HealthPass::kRefused;
  }
  return *this;
}

HealthTicket::~HealthTicket() {
  if (tracker_) tracker_->release(*this);
}

HealthTracker::HealthTracker(const HealthOptions& options) : options_(options) {}

Millis HealthTracker::ejectionTime(unsigned n) const {
  const Millis max = std::max(options_.maxEjection, Millis(0));
  Millis t = std::clamp(options_.baseEjection, Millis(0), max);
  for (unsigned i = 1; i < n && t < max; ++i)
    t *= 2;
  return std::min(t, max);
}

bool HealthTracker::eligible(SteadyTime now) const {
  const State s = decode(word_.load(std::memory_order_acquire));
  return s.phase == kHealthy || clampMs(steadyMs(now)) >= s.deadline;
}

HealthStatus HealthTracker::status(SteadyTime now) const {
  const State s = decode(word_.load(std::memory_order_acquire));
  if (s.phase == kHealthy) return HealthStatus::kHealthy;
  if (s.phase == kEjected && clampMs(steadyMs(now)) < s.deadline) return HealthStatus::kEjected;
  return HealthStatus::kHalfOpen;
}

std::optional<SteadyTime> HealthTracker::ejectedUntil(SteadyTime now) const {
  const State s = decode(word_.load(std::memory_order_acquire));
  if (s.phase != kEjected || clampMs(steadyMs(now)) >= s.deadline) return std::nullopt;
  return steadyFromMs(static_cast<std::int64_t>(s.deadline));
}

std::uint32_t HealthTracker::consecutiveFailures() const {
  return static_cast<std::uint32_t>(decode(word_.load(std::memory_order_relaxed)).failures);
}

SteadyTime HealthTracker::lastEjectedAt() const {
  return steadyFromMs(lastEjectedMs_.load(std::memory_order_relaxed));
}

HealthTicket HealthTracker::admit(SteadyTime now) {
  const std::uint64_t nowMs = clampMs(steadyMs(now));
  std::uint64_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    const State s = decode(w);
    if (s.phase == kHealthy) return HealthTicket(this, HealthPass::kNormal, 0);
    if (nowMs < s.deadline) return HealthTicket();
    // The ejection is over (or the last probe is presumed lost): the request
    // whose CAS lands first is the probe; everyone else sees half-open with a
    // future deadline and is refused.
    State next = s;
    next.phase = kHalfOpen;
    next.deadline = clampMs(static_cast<std::int64_t>(nowMs) +
                            std::max<std::int64_t>(1, options_.probeTimeout.count()));
    if (probeClaimHook_) probeClaimHook_(probeClaimContext_);
    if (word_.compare_exchange_weak(w, encode(next), std::memory_order_acq_rel)) {
      return HealthTicket(this, HealthPass::kProbe, next.deadline);
    }
  }
}

HealthTicket HealthTracker::admitForced(SteadyTime now) {
  if (eligible(now)) {
    HealthTicket t = admit(now);
    if (t) return t;
  }
  return HealthTicket(this, HealthPass::kForced, 0);
}

void HealthTracker::onSuccess(HealthTicket& ticket, SteadyTime /*now*/) {
  if (ticket.tracker_ != this) return;
  const HealthPass pass = ticket.pass_;
  const std::uint64_t stamp = ticket.stamp_;
  ticket.tracker_ = nullptr;
  std::uint64_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    const State s = decode(w);
    if (s.phase == kHealthy) {
      if (s.failures == 0) return;
    } else {
      const bool ourProbe =
          pass == HealthPass::kProbe && s.phase == kHalfOpen && s.deadline == stamp;
      // A request admitted before the ejection says nothing about now.
      if (!ourProbe && pass != HealthPass::kForced) return;
    }
    if (word_.compare_exchange_weak(w, encode(State{}), std::memory_order_acq_rel)) return;
  }
}

void HealthTracker::onFailure(HealthTicket& ticket, SteadyTime now) {
  if (ticket.tracker_ != this) return;
  const HealthPass pass = ticket.pass_;
  const std::uint64_t stamp = ticket.stamp_;
  ticket.tracker_ = nullptr;
  const std::uint64_t nowMs = clampMs(steadyMs(now));
  std::uint64_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    const State s = decode(w);
    State next = s;
    bool eject = false;
    if (s.phase == kHealthy) {
      next.failures = s.failures + 1;
      eject = options_.ejectAfterFailures > 0 && next.failures >= options_.ejectAfterFailures;
    } else if (pass == HealthPass::kProbe && s.phase == kHalfOpen && s.deadline == stamp) {
      eject = true;
    } else {
      return;  // already ejected: stale results and last-resort picks change nothing
    }
    const std::uint64_t nextWord = eject ? ejectedWord(w, nowMs) : encode(next);
    if (word_.compare_exchange_weak(w, nextWord, std::memory_order_acq_rel)) {
      if (eject) countEjection(nowMs);
      return;
    }
  }
}

// The state word an ejection at nowMs moves `w` to: ejected, one more in the
// streak, failures reset, until the streak's ejection time has passed.
std::uint64_t HealthTracker::ejectedWord(std::uint64_t w, std::uint64_t nowMs) const {
  const State s = decode(w);
  State next = s;
  next.phase = kEjected;
  next.streak = std::min(s.streak + 1, kMaxStreak);
  next.failures = 0;
  next.deadline = clampMs(static_cast<std::int64_t>(nowMs) +
                          ejectionTime(static_cast<unsigned>(next.streak)).count());
  return encode(next);
}

void HealthTracker::countEjection(std::uint64_t nowMs) {
  ejections_.fetch_add(1, std::memory_order_relaxed);
  lastEjectedMs_.store(static_cast<std::int64_t>(nowMs), std::memory_order_relaxed);
}

void HealthTracker::noteLateFailure(SteadyTime now) {
  HealthTicket ticket(this, HealthPass::kNormal, 0);
  onFailure(ticket, now);
}

void HealthTracker::ejectNow(SteadyTime now) {
  if (options_.ejectAfterFailures == 0) return;  // ejection is off for this upstream
  const std::uint64_t nowMs = clampMs(steadyMs(now));
  std::uint64_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    const State s = decode(w);
    if (s.phase != kHealthy) return;
    if (word_.compare_exchange_weak(w, ejectedWord(w, nowMs), std::memory_order_acq_rel)) {
      countEjection(nowMs);
      return;
    }
  }
}

void HealthTracker::onNeutral(HealthTicket& ticket) {
  if (ticket.tracker_ != this) return;
  release(ticket);
}

void HealthTracker::release(HealthTicket& ticket) {
  const HealthPass pass = ticket.pass_;
  const std::uint64_t stamp = ticket.stamp_;
  ticket.tracker_ = nullptr;
  if (pass != HealthPass::kProbe) return;
  // Give the probe back: half-open with a deadline already passed, so the
  // next request to arrive claims it. Only if it is still our probe.
  std::uint64_t w = word_.load(std::memory_order_acquire);
  for (;;) {
    const State s = decode(w);
    if (s.phase != kHalfOpen || s.deadline != stamp) return;
    State next = s;
    next.deadline = 0;
    if (word_.compare_exchange_weak(w, encode(next), std::memory_order_acq_rel)) return;
  }
}

}  // namespace relay::upstream
