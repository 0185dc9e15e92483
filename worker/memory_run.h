// The memory request: for each run of the MemorySpec (one, or a sweep of
// context lengths x modes x precisions), the benchmark's own step code
// (RunBenchmark) with the CUDA caching allocator's history recorded over the
// steps after the warm-up, the phases (forward, backward, optimizer_step: the
// steps' RECORD_USER_SCOPEs) as its annotations. Per run it stores the
// snapshot pickle (exactly torch::cuda::_memory_snapshot_pickled(), the
// format memory_viz reads) and the timeline SVG under the job's artifacts
// dir, and fills a MemoryRun from the parsed snapshot (common/memory_analysis.h).
// A run that runs out of memory is a row with the figures at the failure.
#ifndef BENCHD_WORKER_MEMORY_RUN_H_
#define BENCHD_WORKER_MEMORY_RUN_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"
#include "worker/model_cache.h"

namespace benchd::worker {

struct MemoryHooks {
  std::function<void(const v1::StepTiming& timing, int64_t total_steps)> on_step;
  std::function<bool()> cancelled;
  std::function<void(const std::string& line)> log;  // "run 2 of 12: ctx256-forward-bf16"
};

// Artifact names of a run: memory.pickle / timeline.svg for a single run,
// memory-<name>.pickle / timeline-<name>.svg in a sweep.
std::string SnapshotArtifactName(const std::string& run_name, bool sweep);
std::string TimelineArtifactName(const std::string& run_name, bool sweep);

// `spec` resolved (ResolveJobSpec). FAILED_PRECONDITION on a CPU worker or a
// LibTorch without CUDA; CANCELLED; INTERNAL for errors other than out of
// memory. Every run starts from an empty cache (other resident models are
// evicted and the model built fresh from the seed), so its figures are its
// own: no other model, no AdamW state left by an earlier train step.
absl::StatusOr<v1::MemoryResult> RunMemory(const v1::MemorySpec& spec, ModelCache& cache,
                                           const std::string& job_artifacts_dir,
                                           const MemoryHooks& hooks = {});

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_MEMORY_RUN_H_
