// What every job that runs on a process group shares (the collective and the
// data-parallel request): taking its group (the resident one named or
// matching, else a transient one made for the job) and calling Run on every
// member worker at once, with one progress deadline, one cancel, and one
// account of why it failed (a member's worker died: the group is broken,
// FAILED_PRECONDITION; a collective timed out: broken, DEADLINE_EXCEEDED;
// no progress: every member killed, DEADLINE_EXCEEDED).
#ifndef BENCHD_SERVER_JOBS_GROUP_RUN_H_
#define BENCHD_SERVER_JOBS_GROUP_RUN_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchd/internal/worker.pb.h"
#include "benchd/v1/bench.pb.h"
#include "server/jobs/group_registry.h"
#include "server/workers/worker_client.h"

namespace benchd::server {

// The job manager's side of a group job.
struct GroupJobCallbacks {
  std::function<void(const std::string&)> log;
  // The handle of the member calls in flight (nullptr when none), so that a
  // cancel reaches them. Returns false when the job is already to stop (the
  // caller cancels them).
  std::function<bool(CancelHandle*)> set_calls;
  std::function<bool()> cancel_requested;
  std::function<bool()> stopping;
};

// A group a job holds (GroupRegistry::Acquire) until ReleaseGroup.
struct HeldGroup {
  v1::Group group;
  v1::CollectiveGroupUse use;
};

// The group for `target`: the resident one named, or the READY resident
// group with exactly its devices (in that order) and backend, or a transient
// one made now with `timeout_seconds` (its set-up time in use.setup_seconds).
absl::StatusOr<HeldGroup> HoldGroup(GroupRegistry* groups, const v1::CollectiveTarget& target,
                                    double timeout_seconds, const GroupJobCallbacks& cb);
// Releases it; a transient group is destroyed (a failure to is a log line).
void ReleaseGroup(GroupRegistry* groups, const HeldGroup& held, const GroupJobCallbacks& cb);

struct GroupCallOutcome {
  absl::Status status;
  bool interrupted = false;  // the daemon is stopping
};

// A member's event other than the terminal one. Sets *doing to what the
// job does next when the event is progress (the deadline restarts), leaves
// it empty when not. A non-OK status stops every member's call and is the
// call's outcome.
using MemberEventFn =
    std::function<absl::Status(int rank, const internal::WorkerEvent& event, std::string* doing)>;
// A member's result (its last event).
using MemberResultFn = std::function<void(int rank, const v1::JobResult& result)>;

// Run(`request`) on every member of `group` at once, a thread each, until
// all end. `what` names the work in failures ("a collective",
// "data-parallel training"). OK when every member returned a result.
GroupCallOutcome CallEveryMember(Workers* workers, GroupRegistry* groups, const v1::Job& job,
                                 const v1::Group& group, const internal::RunRequest& request,
                                 const std::string& what, const GroupJobCallbacks& cb,
                                 const MemberEventFn& on_event, const MemberResultFn& on_result);

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_GROUP_RUN_H_
