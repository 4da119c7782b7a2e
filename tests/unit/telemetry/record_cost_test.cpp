// What record() costs on the request path. The budget (docs/benchmarks.md,
// BENCH.md) is ≤ 47 µs of CPU per request for the whole gateway; telemetry
// should take a few µs at most. Prints the figures; fails only far above them,
// since the machines running this are shared and noisy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <unistd.h>

#include <gtest/gtest.h>

#include "relay/telemetry/access_log.hpp"
#include "relay/telemetry/metrics.hpp"
#include "relay/telemetry/telemetry.hpp"
#include "telemetry_test_support.hpp"

namespace relay::telemetry {
namespace {

double processCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

struct Figures {
  double wallNs;  // per record(), on the calling thread
  double cpuNs;   // per record(), every thread of the process (the log writer too)
};

// Best of `runs` (the least disturbed by other load) of `n` records cycling
// through 8 label combinations, as a busy gateway would.
Figures measure(Telemetry& t, AccessLog* log, int runs, int n) {
  RequestRecord r;
  r.requestId = "req_0123456789abcdef01234567";
  r.keyName = "team-a";
  r.keyId = test::kTeamA;
  r.model = "kimi-k2";
  r.modelId = test::kKimiK2;
  r.upstream = "holysheep";
  r.upstreamId = test::kHolySheep;
  r.protocol = Protocol::kHttp1;
  r.stream = true;
  r.attempts = 1;
  r.ttftUs = 40'000;
  r.upstreamUs = 35'000;
  r.overheadUs = 25;
  r.usage = {1200, 300, 150};
  Figures best{1e18, 1e18};
  for (int run = 0; run < runs; ++run) {
    const auto wall0 = std::chrono::steady_clock::now();
    const double cpu0 = processCpuNs();
    for (int i = 0; i < n; ++i) {
      r.status = i % 4 == 0 ? 429 : 200;
      r.keyId = static_cast<std::uint32_t>(i % 2);
      r.keyName = i % 2 ? "team-b" : "team-a";
      r.upstreamId = static_cast<std::uint32_t>((i >> 1) % 2);
      r.upstream = (i >> 1) % 2 ? "moonshot" : "holysheep";
      r.durationUs = 50'000 + i % 1000 * 100;
      t.record(r);
    }
    const double wall =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - wall0).count();
    if (log) log->flush();  // the writer's work counts too
    const double cpu = processCpuNs() - cpu0;
    best.wallNs = std::min(best.wallNs, wall / n);
    best.cpuNs = std::min(best.cpuNs, cpu / n);
  }
  return best;
}

TEST(RecordCost, MetricsOnly) {
  Metrics metrics;
  Telemetry t(metrics, nullptr, test::makeConfig());
  const Figures f = measure(t, nullptr, 5, 20'000);
  std::printf("record() without access log: %.0f ns wall, %.0f ns CPU per request\n", f.wallNs,
              f.cpuNs);
  RecordProperty("metrics_only_ns", static_cast<int>(f.wallNs));
  EXPECT_LT(f.wallNs, 10'000);
}

TEST(RecordCost, MetricsAndAccessLog) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("kimi-relay-cost-" + std::to_string(::getpid()) + ".log");
  {
    AccessLog log(path.string());
    Metrics metrics;
    Telemetry t(metrics, &log, test::makeConfig());
    const Figures f = measure(t, &log, 5, 20'000);
    std::printf("record() with access log: %.0f ns wall, %.0f ns CPU (incl. writer) per request\n",
                f.wallNs, f.cpuNs);
    RecordProperty("with_log_ns", static_cast<int>(f.wallNs));
    RecordProperty("with_log_cpu_ns", static_cast<int>(f.cpuNs));
    EXPECT_LT(f.wallNs, 20'000);
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace relay::telemetry
