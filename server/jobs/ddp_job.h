// A data-parallel job in the daemon (v1::DdpSpec): takes its group (resident
// or transient, server/jobs/group_run.h), calls Run on every member at once, and
// turns the ranks' figures into a row per run as each run ends on every
// rank: per step the slowest rank's time, exposed communication against the
// compute-only run, and whether every rank's parameters agree (a run whose
// ranks diverged fails the job: the variant is wrong, not slow).
#ifndef BENCHD_SERVER_JOBS_DDP_JOB_H_
#define BENCHD_SERVER_JOBS_DDP_JOB_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchd/internal/worker.pb.h"
#include "benchd/v1/bench.pb.h"
#include "server/jobs/group_registry.h"
#include "server/jobs/group_run.h"
#include "server/workers/worker_client.h"

namespace benchd::server {

struct DdpJobCallbacks : GroupJobCallbacks {
  std::function<void(const v1::DdpRow&)> on_row;
};

// Runs a RUNNING data-parallel job; sets its final state, result or error.
// The rows carry the overhead model's predictions (common/ddp_model.h); the
// timelines' picture goes to <artifacts_dir>/<job id>/ddp-timeline.svg.
void RunDdpJob(GroupRegistry* groups, Workers* workers, const std::string& artifacts_dir,
               v1::Job* job, const DdpJobCallbacks& cb);

// At Submit: the devices the resolved spec trains on (a group looked up in
// `groups`), sorted, and the spec's batch resolved for that world size.
// NOT_FOUND / FAILED_PRECONDITION for an unknown or broken group,
// INVALID_ARGUMENT for a device not served or a batch that does not split.
absl::StatusOr<std::vector<std::string>> DdpJobDevices(v1::DdpSpec* spec, GroupRegistry* groups,
                                                       const std::vector<std::string>& served);

// One run's row from every rank's figures (rank order); `compute_only_median`
// is the compute-only run's step median (the row's own for run 0).
absl::StatusOr<v1::DdpRow> AggregateDdpRow(const std::vector<internal::DdpRankRun>& ranks,
                                           const v1::DdpSpec& spec, double compute_only_median);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_DDP_JOB_H_
