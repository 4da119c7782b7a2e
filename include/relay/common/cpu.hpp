// How many cores this process may really use.
#pragma once

namespace relay {

// The CPUs in this process's affinity mask, lowered to a cgroup v2 CPU quota
// (cpu.max) when one is set — so `workers: 0` in a container limited to one
// CPU starts one worker, not one per core of the host. At least 1.
unsigned usableCores();

}  // namespace relay
