#include "relay/upstream/health.hpp"

#include <algorithm>
#include <atomic>
#include <latch>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace relay::upstream {
namespace {

SteadyTime at(std::int64_t ms) {
  return SteadyTime(Millis(ms));
}

HealthOptions options() {
  return HealthOptions{.ejectAfterFailures = 3,
                       .baseEjection = Millis(1'000),
                       .maxEjection = Millis(8'000),
                       .probeTimeout = Millis(5'000)};
}

void fail(HealthTracker& h, SteadyTime now, int times = 1) {
  for (int i = 0; i < times; ++i) {
    HealthTicket t = h.admit(now);
    ASSERT_TRUE(t) << "refused at failure " << i;
    h.onFailure(t, now);
  }
}

void succeed(HealthTracker& h, SteadyTime now) {
  HealthTicket t = h.admit(now);
  ASSERT_TRUE(t);
  h.onSuccess(t, now);
}

TEST(Health, ConsecutiveFailuresEject) {
  HealthTracker h(options());
  fail(h, at(0), 2);
  EXPECT_EQ(h.status(at(0)), HealthStatus::kHealthy);
  EXPECT_EQ(h.consecutiveFailures(), 2u);
  fail(h, at(10));
  EXPECT_EQ(h.status(at(10)), HealthStatus::kEjected);
  EXPECT_FALSE(h.eligible(at(10)));
  EXPECT_FALSE(h.admit(at(10)));
  EXPECT_EQ(h.ejectionsTotal(), 1u);
  EXPECT_EQ(h.lastEjectedAt(), at(10));
}

TEST(Health, EjectedUntilNamesTheEndOfTheEjection) {
  HealthTracker h(options());
  EXPECT_FALSE(h.ejectedUntil(at(0)));
  fail(h, at(10), 3);
  ASSERT_TRUE(h.ejectedUntil(at(10)));
  EXPECT_EQ(*h.ejectedUntil(at(500)), at(1'010));
  EXPECT_FALSE(h.ejectedUntil(at(1'010))) << "over: the next request probes";
  EXPECT_EQ(h.status(at(1'010)), HealthStatus::kHalfOpen);
}

TEST(Health, ASuccessResetsTheFailureCount) {
  HealthTracker h(options());
  fail(h, at(0), 2);
  succeed(h, at(1));
  EXPECT_EQ(h.consecutiveFailures(), 0u);
  fail(h, at(2), 2);
  EXPECT_EQ(h.status(at(2)), HealthStatus::kHealthy);
  fail(h, at(3));
  EXPECT_EQ(h.status(at(3)), HealthStatus::kEjected);
}

TEST(Health, EjectionEndsExactlyOnTime) {
  HealthTracker h(options());
  fail(h, at(0), 3);
  EXPECT_FALSE(h.eligible(at(999)));
  EXPECT_EQ(h.status(at(999)), HealthStatus::kEjected);
  EXPECT_TRUE(h.eligible(at(1'000)));
  EXPECT_EQ(h.status(at(1'000)), HealthStatus::kHalfOpen);
}

TEST(Health, EjectionTimeDoublesWithEachFailedProbeUpToTheMax) {
  HealthTracker h(options());
  fail(h, at(0), 3);
  std::int64_t now = 0;
  for (std::int64_t expected : {1'000, 2'000, 4'000, 8'000, 8'000, 8'000}) {
    EXPECT_FALSE(h.eligible(at(now + expected - 1))) << expected;
    now += expected;
    HealthTicket probe = h.admit(at(now));
    ASSERT_EQ(probe.pass(), HealthPass::kProbe) << expected;
    h.onFailure(probe, at(now));
  }
  EXPECT_EQ(h.ejectionsTotal(), 7u);  // the first, then one per failed probe
  EXPECT_EQ(h.ejectionTime(1), Millis(1'000));
  EXPECT_EQ(h.ejectionTime(63), Millis(8'000));
}

TEST(Health, HalfOpenLetsExactlyOneProbeThrough) {
  HealthTracker h(options());
  fail(h, at(0), 3);
  HealthTicket probe = h.admit(at(1'000));
  EXPECT_EQ(probe.pass(), HealthPass::kProbe);
  EXPECT_FALSE(h.eligible(at(1'001)));
  EXPECT_EQ(h.admit(at(1'001)).pass(), HealthPass::kRefused);
  EXPECT_EQ(h.admit(at(3'000)).pass(), HealthPass::kRefused);
  EXPECT_EQ(h.status(at(1'001)), HealthStatus::kHalfOpen);
}

TEST(Health, ProbeSuccessClosesTheCircuitAndResetsTheStreak) {
  HealthTracker h(options());
  fail(h, at(0), 3);
  HealthTicket p1 = h.admit(at(1'000));
  h.onFailure(p1, at(1'000));  // second ejection: 2 s
  HealthTicket p2 = h.admit(at(3'000));
  ASSERT_EQ(p2.pass(), HealthPass::kProbe);
  h.onSuccess(p2, at(3'000));
  EXPECT_EQ(h.status(at(3'000)), HealthStatus::kHealthy);
  EXPECT_EQ(h.admit(at(3'000)).pass(), HealthPass::kNormal);
  // Back to the start: three failures again, and the base ejection time.
  fail(h, at(4'000), 2);
  EXPECT_EQ(h.status(at(4'000)), HealthStatus::kHealthy);
  fail(h, at(4'000));
  EXPECT_FALSE(h.eligible(at(4'999)));
  EXPECT_TRUE(h.eligible(at(5'000)));
}

TEST(Health, ResultsOfRequestsAdmittedBeforeTheEjectionAreIgnored) {
  HealthTracker h(options());
  HealthTicket slowSuccess = h.admit(at(0));
  HealthTicket slowFailure = h.admit(at(0));
  fail(h, at(0), 3);
  h.onSuccess(slowSuccess, at(10));
  h.onFailure(slowFailure, at(10));
  EXPECT_EQ(h.status(at(10)), HealthStatus::kEjected);
  EXPECT_TRUE(h.eligible(at(1'000)));  // not extended either
  EXPECT_EQ(h.ejectionsTotal(), 1u);
}

TEST(Health, ADroppedProbeIsHandedToTheNextRequest) {
  HealthTracker h(options());
  fail(h, at(0), 3);
  {
    HealthTicket probe = h.admit(at(1'000));
    ASSERT_EQ(probe.pass(), HealthPass::kProbe);
  }  // the caller went away without an answer
  EXPECT_TRUE(h.eligible(at(1'001)));
  HealthTicket next = h.admit(at(1'001));
  EXPECT_EQ(next.pass(), HealthPass::kProbe);
  HealthTicket moved = std::move(next);  // moving does not give it back
  EXPECT_EQ(h.admit(at(1'002)).pass(), HealthPass::kRefused);
  h.onNeutral(moved);  // a 429: neither verdict, the probe goes back
  EXPECT_EQ(h.admit(at(1'003)).pass(), HealthPass::kProbe);
}

TEST(Health, ALostProbeIsReplacedAfterTheProbeTimeoutAndItsLateAnswerIgnored) {
  HealthTracker h(options());
  fail(h, at(0), 3);
  HealthTicket lost = h.admit(at(1'000));
  EXPECT_EQ(h.admit(at(5'999)).pass(), HealthPass::kRefused);
  HealthTicket replacement = h.admit(at(6'000));
  EXPECT_EQ(replacement.pass(), HealthPass::kProbe);
  h.onSuccess(lost, at(6'001));
  EXPECT_EQ(h.status(at(6'001)), HealthStatus::kHalfOpen);
  h.onFailure(replacement, at(6'002));
  EXPECT_EQ(h.status(at(6'002)), HealthStatus::kEjected);
  EXPECT_TRUE(h.eligible(at(8'002)));  // second ejection in a row: 2 s
}

TEST(Health, ReportingTwiceCountsOnce) {
  HealthTracker h(options());
  HealthTicket t = h.admit(at(0));
  h.onFailure(t, at(0));
  h.onFailure(t, at(0));
  h.onFailure(t, at(0));
  EXPECT_EQ(h.consecutiveFailures(), 1u);
}

TEST(Health, LastResortRequestsCanCloseButNotExtendAnEjection) {
  HealthTracker h(options());
  fail(h, at(0), 3);
  HealthTicket forced = h.admitForced(at(10));
  EXPECT_EQ(forced.pass(), HealthPass::kForced);
  h.onFailure(forced, at(10));
  EXPECT_TRUE(h.eligible(at(1'000)));
  EXPECT_EQ(h.ejectionsTotal(), 1u);
  HealthTicket again = h.admitForced(at(20));
  h.onSuccess(again, at(20));
  EXPECT_EQ(h.status(at(20)), HealthStatus::kHealthy);
  // Once the ejection is over, a forced admission takes the probe if it is free.
  fail(h, at(30), 3);
  EXPECT_EQ(h.admitForced(at(1'030)).pass(), HealthPass::kProbe);
}

TEST(Health, LateFailuresCountWhileHealthy) {
  HealthTracker h(options());
  h.noteLateFailure(at(0));
  h.noteLateFailure(at(0));
  EXPECT_EQ(h.consecutiveFailures(), 2u);
  h.noteLateFailure(at(0));
  EXPECT_EQ(h.status(at(0)), HealthStatus::kEjected);
}

TEST(Health, ZeroThresholdNeverEjects) {
  HealthOptions o = options();
  o.ejectAfterFailures = 0;
  HealthTracker h(o);
  fail(h, at(0), 1'000);
  EXPECT_EQ(h.status(at(0)), HealthStatus::kHealthy);
  EXPECT_EQ(h.ejectionsTotal(), 0u);
}

// Two threads that both read "ejection over" before either claims the probe:
// the sync point holds each one until the other has arrived, so the claims
// race deterministically. Exactly one may win.
TEST(Health, TwoClaimantsThatReadTheSameStateGetOneProbe) {
  HealthTracker h(options());
  fail(h, at(0), 3);
  std::atomic<int> arrived{0};
  h.setProbeClaimSyncPoint(
      [](void* context) {
        auto& count = *static_cast<std::atomic<int>*>(context);
        // Only the first two arrivals meet; a loser's retry passes straight on.
        if (count.fetch_add(1) < 2) {
          while (count.load() < 2)
            std::this_thread::yield();
        }
      },
      &arrived);
  HealthTicket a;
  HealthTicket b;
  std::thread ta([&] { a = h.admit(at(1'000)); });
  std::thread tb([&] { b = h.admit(at(1'000)); });
  ta.join();
  tb.join();
  h.setProbeClaimSyncPoint(nullptr, nullptr);
  EXPECT_GE(arrived.load(), 2);
  EXPECT_EQ((a.pass() == HealthPass::kProbe) + (b.pass() == HealthPass::kProbe), 1);
  EXPECT_EQ((a.pass() == HealthPass::kRefused) + (b.pass() == HealthPass::kRefused), 1);
}

TEST(Health, ConcurrentWorkersGetExactlyOneProbe) {
  // Persistent threads released together by a spin barrier, many rounds: a
  // latch wakes threads microseconds apart, too far apart to race; spinning
  // threads hit admit() within nanoseconds of each other, so a probe claimed
  // by a plain store instead of a CAS is caught.
  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 2u, 4u));
  constexpr int kRounds = 3'000;
  HealthTracker h(options());
  std::atomic<int> round{-1};
  std::atomic<int> finished{0};
  std::vector<HealthTicket> tickets(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  auto expiredAt = [](int r) { return at(static_cast<std::int64_t>(r) * 100'000 + 1'000); };
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back([&, i] {
      for (int r = 0; r < kRounds; ++r) {
        // Spin (threads already running start together), but yield when the
        // wait is long so that the set-up thread gets a core on a busy machine.
        for (int spins = 0; round.load(std::memory_order_acquire) < r; ++spins) {
          if (spins > 2'000) std::this_thread::yield();
        }
        tickets[static_cast<std::size_t>(i)] = h.admit(expiredAt(r));
        finished.fetch_add(1, std::memory_order_acq_rel);
      }
    });
  }
  int rounds = 0;
  for (int r = 0; r < kRounds; ++r) {
    fail(h, at(static_cast<std::int64_t>(r) * 100'000), 3);
    ASSERT_EQ(h.status(expiredAt(r)), HealthStatus::kHalfOpen);
    finished.store(0, std::memory_order_relaxed);
    round.store(r, std::memory_order_release);
    while (finished.load(std::memory_order_acquire) < threads)
      std::this_thread::yield();
    int probes = 0;
    for (HealthTicket& t : tickets)
      probes += t.pass() == HealthPass::kProbe;
    EXPECT_EQ(probes, 1) << "round " << r;
    if (probes != 1) break;
    for (HealthTicket& t : tickets)
      h.onSuccess(t, expiredAt(r));  // only the real probe counts
    ASSERT_EQ(h.status(expiredAt(r)), HealthStatus::kHealthy);
    ++rounds;
  }
  round.store(kRounds, std::memory_order_release);
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(rounds, kRounds);
}

TEST(Health, ConcurrentFailuresEjectOnce) {
  constexpr int kThreads = 8;
  HealthOptions o = options();
  o.ejectAfterFailures = 100;
  HealthTracker h(o);
  std::vector<HealthTicket> tickets;
  for (int i = 0; i < kThreads * 50; ++i)
    tickets.push_back(h.admit(at(0)));
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      for (int j = 0; j < 50; ++j)
        h.onFailure(tickets[static_cast<std::size_t>(i) * 50 + static_cast<std::size_t>(j)], at(0));
    });
  }
  for (auto& th : threads)
    th.join();
  // 400 failures, 100 to eject: one ejection, the rest arrive while ejected.
  EXPECT_EQ(h.ejectionsTotal(), 1u);
  EXPECT_EQ(h.status(at(0)), HealthStatus::kEjected);
}

}  // namespace
}  // namespace relay::upstream
