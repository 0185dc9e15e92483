// A named range of the step ("forward", "attention.softmax", ...), seen by
// both profilers: an NVTX range for an external Nsight Systems run, and a
// RecordFunction user scope for the PyTorch profiler inside the worker (the
// profile request attributes kernels to these). Outside a profile the
// RecordFunction is inactive and costs a thread-local check.
#ifndef BENCHD_WORKER_NAMED_RANGE_H_
#define BENCHD_WORKER_NAMED_RANGE_H_

#include <ATen/record_function.h>

#include "worker/nvtx_range.h"

namespace benchd::worker {

class NamedRange {
 public:
  // `name` must outlive the range (a string literal).
  explicit NamedRange(const char* name) : nvtx_(name), record_(at::RecordScope::USER_SCOPE) {
    if (record_.isActive()) record_.before(name);
  }
  NamedRange(const NamedRange&) = delete;
  NamedRange& operator=(const NamedRange&) = delete;

 private:
  NvtxRange nvtx_;
  at::RecordFunction record_;
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_NAMED_RANGE_H_
