#include "relay/common/cpu.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sched.h>
#include <string>
#include <thread>

namespace relay {

unsigned usableCores() {
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    cores = std::max(1, CPU_COUNT(&set));
  }
  // cgroup v2: "max 100000" (no limit) or "<quota> <period>".
  std::ifstream f("/sys/fs/cgroup/cpu.max");
  std::string quota;
  double period = 0;
  if (f >> quota >> period && quota != "max" && period > 0) {
    double q = std::strtod(quota.c_str(), nullptr);
    if (q > 0) cores = std::min(cores, std::max(1u, static_cast<unsigned>(std::ceil(q / period))));
  }
  return cores;
}

}  // namespace relay
