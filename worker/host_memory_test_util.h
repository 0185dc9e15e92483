// For the tests that make the host run out of memory for real.
#ifndef BENCHD_WORKER_HOST_MEMORY_TEST_UTIL_H_
#define BENCHD_WORKER_HOST_MEMORY_TEST_UTIL_H_

#include <cstdint>
#include <fstream>
#include <string>

namespace benchd::worker {

// True when the kernel refuses an allocation of `bytes` outright: under the
// heuristic (vm.overcommit_memory 0) or strict (2) policy, past RAM + swap.
// Under mode 1 the allocation would succeed and the init would fill it.
inline bool KernelRefusesAllocation(int64_t bytes) {
  int mode = -1;
  std::ifstream("/proc/sys/vm/overcommit_memory") >> mode;
  if (mode != 0 && mode != 2) return false;
  std::ifstream meminfo("/proc/meminfo");
  std::string name, unit;
  int64_t kb = 0, ram_and_swap = 0;
  while (meminfo >> name >> kb >> unit) {
    if (name == "MemTotal:" || name == "SwapTotal:") ram_and_swap += kb * 1024;
  }
  return ram_and_swap < bytes;
}

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_HOST_MEMORY_TEST_UTIL_H_
