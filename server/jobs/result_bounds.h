// Keeps a finished job small enough for every reply that carries it (GetJob,
// Watch's terminal event; gRPC clients refuse messages over 4 MB by default)
// and for the daemon's memory: a 100,000-step benchmark's result holds
// 100,000 StepTimings (8.5 MB). Applied once, when the job finishes, before it
// is stored; what is cut goes to the job's artifacts folder, and the result
// says how much there was and where it is. Statistics are the worker's, over
// every step, and are not touched.
#ifndef BENCHD_SERVER_JOBS_RESULT_BOUNDS_H_
#define BENCHD_SERVER_JOBS_RESULT_BOUNDS_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "benchd/v1/bench.pb.h"

namespace benchd::server {

// StepTimings a stored BenchmarkResult keeps (the first ones, warm-up first);
// every step is in the steps artifact.
inline constexpr int kMaxResultSteps = 1000;
inline constexpr char kStepsArtifact[] = "steps.csv";
inline constexpr char kUnprofiledStepsArtifact[] = "unprofiled_steps.csv";
// A sweep's cell N: cell-N-steps.csv, cell-N-unprofiled_steps.csv.
// A job still larger than this after the steps are cut (a collective of many
// rows of 100,000 iterations, say) keeps a summary of its result
// (server/jobs/job_summary.h) and the whole result goes to an artifact.
inline constexpr size_t kMaxStoredJobBytes = 2 << 20;
inline constexpr char kResultArtifact[] = "result.binpb";

// Cuts `job`'s result to the bounds above, writing what it cuts under
// <artifacts_dir>/<job id>/. The job is bounded whatever happens; an error
// says which artifact could not be written (its field is then "").
absl::Status BoundJobResult(v1::Job* job, const std::string& artifacts_dir);

// Every step as CSV: index,warmup,step_seconds,host_seconds,forward_seconds,
// backward_seconds,optimizer_seconds,loss.
std::string StepsCsv(const v1::BenchmarkResult& result);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_RESULT_BOUNDS_H_
