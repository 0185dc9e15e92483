// A collective job in the daemon: for every series (target x world size) it
// takes a group (the resident one named or matching, else a transient one it
// makes and destroys), calls Run on every member worker at once, and turns
// their per-rank figures into rows as each size completes on all ranks (the
// slowest rank per iteration, common/collective_math). Failures name the
// group and why: a member's worker died (the group is broken,
// FAILED_PRECONDITION), a collective timed out (broken, DEADLINE_EXCEEDED).
#ifndef BENCHD_SERVER_JOBS_COLLECTIVE_JOB_H_
#define BENCHD_SERVER_JOBS_COLLECTIVE_JOB_H_

#include <functional>
#include <string>
#include <vector>

#include "benchd/v1/bench.pb.h"
#include "server/jobs/group_registry.h"
#include "server/jobs/group_run.h"
#include "server/workers/worker_client.h"

namespace benchd::server {

class Metrics;

struct CollectiveJobDeps {
  GroupRegistry* groups = nullptr;
  Workers* workers = nullptr;
  Metrics* metrics = nullptr;
  std::string artifacts_dir;  // plots go to <artifacts_dir>/<job id>/<name>.svg; "" = none
};

struct CollectiveJobCallbacks : GroupJobCallbacks {
  std::function<void(const v1::CollectiveRow&)> on_row;
};

// Runs a RUNNING collective job; sets its final state, result or error.
void RunCollectiveJob(const CollectiveJobDeps& deps, v1::Job* job,
                      const CollectiveJobCallbacks& callbacks);

// The devices a resolved collective spec needs (group targets looked up in
// `groups`), sorted; NOT_FOUND / FAILED_PRECONDITION for an unknown or
// broken group, INVALID_ARGUMENT for a device not served.
absl::StatusOr<std::vector<std::string>> CollectiveJobDevices(
    const v1::CollectiveSpec& spec, GroupRegistry* groups, const std::vector<std::string>& served);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_COLLECTIVE_JOB_H_
