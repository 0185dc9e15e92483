// The profile request (v1::ProfileSpec; docs/architecture.md "The profile
// request"): the benchmark's own step (RunBenchmark) run twice on the
// resident model, first unprofiled (the spec's warm-up and measured steps:
// what profiling is compared with), then one more warm-up step and
// profile_steps steps under the PyTorch profiler (Kineto; CUPTI on a GPU),
// started through the benchmark's measure hooks. The profiler's event tree
// is flattened into ProfileEvents and summarized per named range by
// common/profile_analysis.h; its Chrome trace is written as the artifact
// trace.json under the job's artifacts dir.
#ifndef BENCHD_WORKER_PROFILE_RUN_H_
#define BENCHD_WORKER_PROFILE_RUN_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"
#include "worker/model_cache.h"

namespace benchd::worker {

struct ProfileHooks {
  // Steps of both runs, as a benchmark's (total counts the run's own steps).
  std::function<void(const v1::StepTiming& timing, int64_t total_steps)> on_step;
  std::function<bool()> cancelled;
  std::function<void(const std::string& line)> log;  // "profiled run: 1 warm-up + 3 steps"
};

inline constexpr char kTraceArtifact[] = "trace.json";

// `spec` resolved (ResolveJobSpec). FAILED_PRECONDITION for the cuda
// activity on a CPU worker; CANCELLED; RESOURCE_EXHAUSTED / INTERNAL as
// RunBenchmark. The profiler is off again whichever way it returns.
absl::StatusOr<v1::ProfileResult> RunProfile(const v1::ProfileSpec& spec, ModelCache& cache,
                                             const std::string& job_artifacts_dir,
                                             const ProfileHooks& hooks = {});

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_PROFILE_RUN_H_
