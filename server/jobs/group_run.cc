#include "server/jobs/group_run.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/collective_math.h"
#include "common/job_spec.h"
#include "server/jobs/progress_deadline.h"

namespace benchd::server {
namespace {

// How long the supervisor may take to see that a member's worker ended.
constexpr std::chrono::seconds kExitWait{5};

}  // namespace

absl::StatusOr<HeldGroup> HoldGroup(GroupRegistry* groups, const v1::CollectiveTarget& target,
                                    double timeout_seconds, const GroupJobCallbacks& cb) {
  HeldGroup held;
  absl::StatusOr<v1::Group> group = absl::UnknownError("");
  if (!target.group().empty()) {
    group = groups->Acquire(target.group());
    held.use.set_was_resident(true);
  } else {
    const std::vector<std::string> devices(target.devices().begin(), target.devices().end());
    if (auto resident = groups->FindReady(devices, target.backend())) {
      group = groups->Acquire(resident->id());
      held.use.set_was_resident(true);
    }
    if (!group.ok()) {
      v1::CreateGroupRequest req;
      *req.mutable_devices() = target.devices();
      req.set_backend(target.backend());
      req.set_timeout_seconds(timeout_seconds);
      if (cb.log) {
        cb.log(absl::StrCat("setting up a transient ", BackendName(target.backend()), " group on ",
                            absl::StrJoin(devices, ",")));
      }
      auto made = groups->Create(req, /*transient=*/true);
      if (!made.ok()) {
        return absl::Status(
            made.status().code(),
            absl::StrCat("setting up a transient ", BackendName(target.backend()), " group on ",
                         absl::StrJoin(devices, ","), ": ", made.status().message()));
      }
      held.use.set_was_resident(false);
      held.use.set_transient(true);
      held.use.set_setup_seconds(made->setup_seconds());
      group = groups->Acquire(made->id());
    }
  }
  if (!group.ok()) return group.status();
  held.group = *std::move(group);
  held.use.set_group(held.group.id());
  held.use.set_backend(held.group.backend());
  *held.use.mutable_devices() = held.group.devices();
  return held;
}

void ReleaseGroup(GroupRegistry* groups, const HeldGroup& held, const GroupJobCallbacks& cb) {
  groups->Release(held.group.id());
  if (!held.use.transient()) return;
  // The job's own group: a failure to drop it is worth a line, not the job.
  if (auto dropped = groups->Destroy(held.group.id()); !dropped.ok() && cb.log) {
    cb.log(absl::StrCat("could not drop the job's transient group ", held.group.id(), ": ",
                        dropped.status().message()));
  }
}

GroupCallOutcome CallEveryMember(Workers* workers_in, GroupRegistry* groups, const v1::Job& job,
                                 const v1::Group& group, const internal::RunRequest& request,
                                 const std::string& what, const GroupJobCallbacks& cb,
                                 const MemberEventFn& on_event, const MemberResultFn& on_result) {
  const int world = group.devices_size();
  const std::vector<uint64_t> generations = groups->Generations(group.id());
  std::vector<std::shared_ptr<WorkerClient>> workers;
  for (int r = 0; r < world; ++r) {
    auto w = workers_in->WaitUntilUp(group.devices(r), std::chrono::seconds(30));
    if (!w.ok()) return {w.status()};
    if (r < static_cast<int>(generations.size()) && (*w)->generation() != generations[r]) {
      const std::string reason = absl::StrCat("the worker for ", group.devices(r), " (rank ", r,
                                              ") restarted after the group was made");
      groups->MarkBroken(group.id(), reason);
      return {absl::FailedPreconditionError(
          absl::StrCat("group ", group.id(), " is broken: ", reason, "; re-create the group"))};
    }
    workers.push_back(*w);
  }

  // One handle for every member's call: a cancel, a stop or a failed rank
  // ends them all.
  CancelHandle calls;
  if (!cb.set_calls(&calls)) calls.Cancel();

  // Progress on any rank restarts the deadline; none for the job's deadline
  // (a stopped worker, a collective that never completes) kills every
  // member's worker: the group cannot be trusted after that.
  const double deadline_seconds = ProgressTimeoutSeconds(job.spec());
  ProgressDeadline progress(
      std::chrono::milliseconds(static_cast<int64_t>(deadline_seconds * 1000)),
      absl::StrCat("starting ", what, " on group ", group.id()), [&](const std::string& doing) {
        const std::string why =
            absl::StrCat("no progress for ", deadline_seconds, " s while ", doing);
        for (int r = 0; r < world; ++r) {
          workers_in->Kill(group.devices(r), workers[r]->generation(), why);
        }
        calls.Cancel();
      });

  std::mutex mu;  // the callbacks, terminal, transport
  std::vector<std::optional<absl::Status>> terminal(world);
  std::vector<absl::Status> transport(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      absl::Status event_error;
      const RunEnd end = workers[r]->Run(request, calls, [&](const internal::WorkerEvent& e) {
        if (!event_error.ok()) return;
        std::string doing;
        {
          std::lock_guard<std::mutex> lock(mu);
          event_error = on_event(r, e, &doing);
        }
        if (!doing.empty()) progress.Progress(doing);
        if (!event_error.ok()) calls.Cancel();
      });
      bool failed;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!event_error.ok()) {
          terminal[r] = event_error;
        } else if (end.last.has_value() && end.last->has_result()) {
          terminal[r] = absl::OkStatus();
          on_result(r, end.last->result());
        } else if (end.last.has_value() && end.last->has_failure()) {
          terminal[r] = absl::Status(static_cast<absl::StatusCode>(end.last->failure().code()),
                                     end.last->failure().message());
        } else if (end.last.has_value()) {
          terminal[r] = absl::CancelledError("cancelled");
        } else {
          transport[r] = end.status;
        }
        failed = !terminal[r].has_value() || !terminal[r]->ok();
      }
      // A rank that failed or vanished: the others cannot finish; stop
      // waiting for them (their own collectives fail on their own).
      if (failed) calls.Cancel();
    });
  }
  for (auto& t : threads) t.join();
  cb.set_calls(nullptr);
  if (progress.expired()) {
    // Each member's worker by device and pid; another node's is killed and
    // restarted by its own daemon (its log says so).
    std::vector<std::string> pids;
    for (int r = 0; r < world; ++r) {
      const std::string& d = group.devices(r);
      const size_t slash = d.find('/');
      pids.push_back(slash == std::string::npos ? absl::StrCat(d, " (pid ", workers[r]->pid(), ")")
                                                : absl::StrCat(d, " (pid ", workers[r]->pid(),
                                                               " on ", d.substr(0, slash), ")"));
    }
    const std::string reason = absl::StrCat(
        "no progress for ", deadline_seconds, " s (the job's progress deadline) while ",
        progress.doing(), "; the member workers ", absl::StrJoin(pids, ", "),
        " were killed and are being restarted");
    groups->MarkBroken(group.id(), reason);
    return {absl::DeadlineExceededError(
        absl::StrCat("group ", group.id(), " is broken: ", reason, "; re-create the group"))};
  }

  // Why it ended. A member whose worker died is the root cause of the others'
  // failures: look for one first. The supervisor may see an exit a moment
  // after the stream broke: a first look at every rank, then up to 5 s in all
  // (not per rank: the living ranks would each use it up), and no waiting
  // when the calls ended because the job was cancelled or the daemon stops.
  const bool ended_by_us =
      (cb.cancel_requested && cb.cancel_requested()) || (cb.stopping && cb.stopping());
  const auto exit_deadline =
      std::chrono::steady_clock::now() + (ended_by_us ? std::chrono::seconds(0) : kExitWait);
  for (const bool wait : {false, true}) {
    for (int r = 0; r < world; ++r) {
      if (terminal[r].has_value()) continue;
      const auto left = std::max(std::chrono::milliseconds(0),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(
                                     exit_deadline - std::chrono::steady_clock::now()));
      const std::string how = workers_in->WaitForExit(group.devices(r), workers[r]->generation(),
                                                      wait ? left : std::chrono::milliseconds(0));
      if (how.empty()) continue;
      const std::string reason =
          absl::StrCat("the worker for ", group.devices(r), " (rank ", r, ", pid ",
                       workers[r]->pid(), ") ", how, " during ", what);
      groups->MarkBroken(group.id(), reason);
      return {absl::FailedPreconditionError(absl::StrCat(
          "group ", group.id(), " (", BackendName(group.backend()), " on ",
          absl::StrJoin(group.devices(), ","), ") broke while this job ran: ", reason,
          "; the worker is being restarted; re-create the group "
          "(benchctl groups create --device ",
          absl::StrJoin(group.devices(), ","), " --backend ", BackendName(group.backend()), ")"))};
    }
  }
  if (cb.stopping && cb.stopping())
    return {absl::AbortedError("the daemon stopped while this job was running"), true};
  if (cb.cancel_requested && cb.cancel_requested())
    return {absl::CancelledError("cancelled while running")};
  // A timeout first (it says what hung), then any other failure.
  std::optional<absl::Status> failure;
  for (int r = 0; r < world; ++r) {
    if (terminal[r].has_value() && absl::IsDeadlineExceeded(*terminal[r])) failure = terminal[r];
  }
  for (int r = 0; r < world && !failure; ++r) {
    if (terminal[r].has_value() && !terminal[r]->ok() && !absl::IsCancelled(*terminal[r]))
      failure = terminal[r];
  }
  // A stream that broke on its own (a member's daemon or worker gone) before
  // those we cancelled because of it.
  for (const bool cancelled_too : {false, true}) {
    for (int r = 0; r < world && !failure; ++r) {
      if (terminal[r].has_value() || (absl::IsCancelled(transport[r]) && !cancelled_too)) continue;
      failure =
          absl::UnavailableError(absl::StrCat("lost the worker for ", group.devices(r), " (rank ",
                                              r, ") during ", what, ": ", transport[r].message()));
    }
  }
  if (failure) {
    groups->MarkBroken(group.id(), std::string(failure->message()));
    return {absl::Status(failure->code(),
                         absl::StrCat("group ", group.id(), " is broken: ", failure->message()))};
  }
  for (int r = 0; r < world; ++r) {
    if (absl::IsCancelled(*terminal[r])) return {absl::CancelledError("cancelled while running")};
  }
  return {absl::OkStatus()};
}

}  // namespace benchd::server
