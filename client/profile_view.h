// What `benchctl submit profile --watch` and `benchctl get` print for a profile job: the
// step time with and without the profiler, the ranges (wall time against the
// kernels' time, the device's idle share, the GEMM share, FLOPs), the
// attention parts side by side, and per range the nsys-style kernel table.
#ifndef BENCHD_CLIENT_PROFILE_VIEW_H_
#define BENCHD_CLIENT_PROFILE_VIEW_H_

#include <string>

#include "benchd/v1/bench.pb.h"

namespace benchd::client {

struct ProfileViewOptions {
  int top = 10;            // kernels per range (and non-GEMM kernels per range)
  bool all = false;        // every kernel of every range
  size_t name_width = 90;  // kernel names are shortened to this for display only
};

// "small forward fp32, 3 profiled steps, cpu+cuda".
std::string ProfileSpecSummary(const v1::ProfileSpec& p);
// One row per range: instances per step, wall, kernels, idle, GEMM share,
// launches per step, GFLOP and TFLOP/s per step.
std::string ProfileRangeTable(const v1::ProfileResult& r, const std::string& indent = "");
// The attention parts (attention.scores, .mask, .softmax, .weighted_sum) with
// their share of the attention's kernel time next to their share of its
// FLOPs; "" when the profile has no parts (SDPA attention).
std::string AttentionPartsTable(const v1::ProfileResult& r, const std::string& indent = "");
// The kernel table of one range (Time %, Total, Instances, Avg, Med, Min,
// Max, StdDev, per step, GEMM, Name), its `top` largest rows or all.
std::string KernelTable(const v1::ProfileRange& range, const ProfileViewOptions& o,
                        bool non_gemm_only = false, const std::string& indent = "");
// The whole report.
std::string ProfileResultView(const v1::ProfileResult& r, const ProfileViewOptions& o = {});

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_PROFILE_VIEW_H_
