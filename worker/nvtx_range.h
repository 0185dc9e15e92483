// A scoped NVTX range, seen by an external Nsight Systems run. Header-only
// NVTX 3 (from the CUDA toolkit) loads its tool library only when a profiler
// injects one, so outside nsys a range costs next to nothing. Builds without
// the toolkit get an empty range.
#ifndef BENCHD_WORKER_NVTX_RANGE_H_
#define BENCHD_WORKER_NVTX_RANGE_H_

#if BENCHD_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace benchd::worker {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) {
#if BENCHD_HAVE_NVTX
    nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#if BENCHD_HAVE_NVTX
    nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_NVTX_RANGE_H_
