#include "server/jobs/result_bounds.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/artifacts.h"
#include "server/jobs/job_summary.h"

namespace benchd::server {
namespace {

// Writes `bytes` as <artifacts_dir>/<job id>/<name>.
absl::Status WriteArtifact(const std::string& artifacts_dir, const std::string& job_id,
                           const std::string& name, const std::string& bytes) {
  if (artifacts_dir.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, ": ", name, " not written: this daemon has no artifacts dir"));
  }
  absl::StatusOr<std::string> dir = JobArtifactsDir(artifacts_dir, job_id, "result");
  if (!dir.ok()) return dir.status();
  if (auto s = MakeDirs(*dir); !s.ok()) return s;
  return WriteFileAtomically(absl::StrCat(*dir, "/", name), bytes);
}

absl::Status BoundSteps(v1::BenchmarkResult* r, const std::string& artifacts_dir,
                        const std::string& job_id, const std::string& name) {
  if (r->steps_size() <= kMaxResultSteps) return absl::OkStatus();
  r->set_steps_total(r->steps_size());
  absl::Status s = WriteArtifact(artifacts_dir, job_id, name, StepsCsv(*r));
  r->set_steps_artifact(s.ok() ? name : "");
  r->mutable_steps()->DeleteSubrange(kMaxResultSteps, r->steps_size() - kMaxResultSteps);
  return s;
}

}  // namespace

std::string StepsCsv(const v1::BenchmarkResult& result) {
  std::string out =
      "index,warmup,step_seconds,host_seconds,forward_seconds,backward_seconds,"
      "optimizer_seconds,loss\n";
  for (const v1::StepTiming& t : result.steps()) {
    absl::StrAppendFormat(&out, "%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n", t.index(), t.warmup(),
                          t.step_seconds(), t.host_seconds(), t.forward_seconds(),
                          t.backward_seconds(), t.optimizer_seconds(), t.loss());
  }
  return out;
}

absl::Status BoundJobResult(v1::Job* job, const std::string& artifacts_dir) {
  if (!job->has_result()) return absl::OkStatus();
  absl::Status status;
  v1::JobResult* result = job->mutable_result();
  if (result->has_benchmark()) {
    status.Update(
        BoundSteps(result->mutable_benchmark(), artifacts_dir, job->id(), kStepsArtifact));
  }
  if (result->has_profile() && result->profile().has_unprofiled()) {
    status.Update(BoundSteps(result->mutable_profile()->mutable_unprofiled(), artifacts_dir,
                             job->id(), kUnprofiledStepsArtifact));
  }
  // A sweep's cells each keep their first steps, as a job of their own would;
  // every step goes to an artifact of the cell.
  for (int i = 0; result->has_sweep() && i < result->sweep().cells_size(); ++i) {
    v1::SweepCell& cell = *result->mutable_sweep()->mutable_cells(i);
    if (!cell.has_result()) continue;  // an OOM, TIMEOUT or FAILED row
    v1::JobResult* r = cell.mutable_result();
    const std::string prefix = absl::StrCat("cell-", cell.index(), "-");
    if (r->has_benchmark()) {
      status.Update(
          BoundSteps(r->mutable_benchmark(), artifacts_dir, job->id(), prefix + kStepsArtifact));
    }
    if (r->has_profile() && r->profile().has_unprofiled()) {
      status.Update(BoundSteps(r->mutable_profile()->mutable_unprofiled(), artifacts_dir, job->id(),
                               prefix + kUnprofiledStepsArtifact));
    }
  }
  if (job->ByteSizeLong() > kMaxStoredJobBytes) {
    absl::Status s =
        WriteArtifact(artifacts_dir, job->id(), kResultArtifact, result->SerializeAsString());
    SummarizeResult(result);
    result->set_artifact(s.ok() ? kResultArtifact : "");
    status.Update(s);
  }
  return status;
}

}  // namespace benchd::server
