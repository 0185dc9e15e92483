// The profile request's analysis: from the profiler's event tree (named
// ranges, operators, runtime calls, device activities, with the profiler's
// own parent links) to the nsys-style kernel table of each named range.
// Torch-free, so CI tests it on trees whose answers are known; the worker
// (worker/profile_run.cc) flattens Kineto's tree into ProfileEvents.
//
// How a kernel finds its range: the profiler links each device activity to
// the runtime call that launched it (CUPTI correlation), that call to its
// operator and the operator to the named range around it (nesting on the
// host thread). The autograd engine runs backward on its own device thread,
// where no range is open: an event there whose same-thread ancestors hold no
// range belongs to the innermost range on another thread open when it
// started (loss.backward() blocks the job's thread inside "backward" while the
// engine works) -- the one time window used, and only where the links end.
// Kineto's own links across threads are not followed (they hang every
// step's engine events under the first step's backward).
#ifndef BENCHD_COMMON_PROFILE_ANALYSIS_H_
#define BENCHD_COMMON_PROFILE_ANALYSIS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "benchd/v1/bench.pb.h"

namespace benchd {

struct ProfileEvent {
  enum class Kind {
    kRange,     // a named range (RECORD_USER_SCOPE): "forward", "attention.softmax"
    kOperator,  // an operator or autograd function: "aten::mm"
    kRuntime,   // a CUDA runtime/driver call: "cudaLaunchKernel"
    kDevice,    // a kernel, memcpy or memset on the device
  };
  Kind kind = Kind::kOperator;
  std::string name;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t thread = 0;  // host thread; unused for device activities
  int parent = -1;      // index of the parent event, -1 for a root
};

struct ProfileAnalysisInput {
  std::vector<ProfileEvent> events;
  int64_t steps = 1;  // profiled steps, for the per-step figures
  // True: the rows are device activities (a GPU profile). False: the rows are
  // operators' self times (a CPU-only profile).
  bool device_rows = true;
  // Model FLOPs per step by range name; ranges not named have none.
  std::map<std::string, double> flops_per_step;
};

struct ProfileAnalysis {
  std::vector<v1::ProfileRange> ranges;  // in the order they first open
  int64_t unattributed_kernels = 0;
  double unattributed_kernel_seconds = 0;
};

// Matrix-multiply operators (their kernels are GEMMs).
bool IsMatmulOperator(const std::string& op);
// cuBLAS / CUTLASS GEMM kernel names: gemm, nvjet, xmma, wgmma (case-insensitive).
bool LooksLikeGemmKernel(const std::string& kernel);

ProfileAnalysis AnalyzeProfile(const ProfileAnalysisInput& input);

// "void at::native::vectorized_elementwise_kernel<4, at::native::...>(int, ...)"
// shortened to at most `width` characters for a table: template arguments and
// parameter lists are elided ("<...>", "(...)") before the tail is cut.
std::string ShortKernelName(const std::string& name, size_t width);

}  // namespace benchd

#endif  // BENCHD_COMMON_PROFILE_ANALYSIS_H_
