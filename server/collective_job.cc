#include "server/collective_job.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/artifacts.h"
#include "common/collective_math.h"
#include "common/collective_svg.h"
#include "common/job_spec.h"
#include "server/config.h"
#include "server/metrics.h"
#include "server/progress_deadline.h"

namespace benchd::server {
namespace {

// How long the supervisor may take to see that a member's worker ended.
constexpr std::chrono::seconds kExitWait{5};

struct Outcome {
  absl::Status status;
  bool interrupted = false;
};

// One series on one group: Run on every member at once, a thread each (the
// calls block until the series ends).
Outcome RunSeries(const CollectiveJobDeps& deps, const v1::Job& job, const v1::Group& group,
                  const CollectiveJobCallbacks& cb, v1::CollectiveResult* result) {
  const v1::CollectiveSpec& spec = job.spec().collective();
  const int world = group.devices_size();
  const std::vector<uint64_t> generations = deps.groups->Generations(group.id());
  std::vector<std::shared_ptr<WorkerClient>> workers;
  for (int r = 0; r < world; ++r) {
    auto w = deps.workers->WaitUntilUp(group.devices(r), std::chrono::seconds(30));
    if (!w.ok()) return {w.status()};
    if (r < static_cast<int>(generations.size()) && (*w)->generation() != generations[r]) {
      const std::string reason = absl::StrCat("the worker for ", group.devices(r), " (rank ", r,
                                              ") restarted after the group was made");
      deps.groups->MarkBroken(group.id(), reason);
      return {absl::FailedPreconditionError(
          absl::StrCat("group ", group.id(), " is broken: ", reason, "; re-create the group"))};
    }
    workers.push_back(*w);
  }
  internal::RunRequest request;
  request.set_job_id(job.id());
  *request.mutable_spec() = job.spec();
  internal::CollectiveRun* run = request.mutable_collective();
  run->set_group(group.id());
  run->set_op(spec.op());
  run->set_dtype(spec.dtype());
  *run->mutable_sizes_bytes() = spec.sizes_bytes();
  run->set_warmup_iters(spec.warmup_iters());
  run->set_iters(spec.iters());
  run->set_in_place(spec.in_place());
  run->set_timeout_seconds(group.timeout_seconds());

  // One handle for every member's call: a cancel, a stop or a failed rank
  // ends them all.
  CancelHandle calls;
  if (!cb.set_calls(&calls)) calls.Cancel();

  // Every size a rank finishes is progress; none for the job's deadline
  // (a stopped worker, a collective that never completes) kills every
  // member's worker: the group cannot be trusted after that.
  const double deadline_seconds = ProgressTimeoutSeconds(job.spec());
  ProgressDeadline progress(
      std::chrono::milliseconds(static_cast<int64_t>(deadline_seconds * 1000)),
      absl::StrCat("starting the series on group ", group.id()), [&](const std::string& doing) {
        const std::string why =
            absl::StrCat("no progress for ", deadline_seconds, " s while ", doing);
        for (int r = 0; r < world; ++r) {
          deps.workers->Kill(group.devices(r), workers[r]->generation(), why);
        }
        calls.Cancel();
      });

  std::mutex mu;
  const int sizes = spec.sizes_bytes_size();
  std::vector<std::vector<std::optional<internal::CollectiveRankSize>>> got(
      sizes, std::vector<std::optional<internal::CollectiveRankSize>>(world));
  std::vector<int> next_size(world, 0);
  std::vector<std::optional<absl::Status>> terminal(world);
  std::vector<absl::Status> transport(world);

  // Rank r's figures for its next size; when every rank has that size, its
  // row goes out. An error when the figures cannot be aggregated.
  auto add_size = [&](int r, const internal::CollectiveRankSize& size) -> absl::Status {
    std::lock_guard<std::mutex> lock(mu);
    const int i = next_size[r]++;
    if (i >= sizes) return absl::OkStatus();
    got[i][r] = size;
    progress.Progress(i + 1 < sizes ? absl::StrCat("running size ", i + 2, " of ", sizes, " (",
                                                   spec.sizes_bytes(i + 1), " bytes) on rank ", r)
                                    : absl::StrCat("finishing on rank ", r));
    if (!std::all_of(got[i].begin(), got[i].end(), [](const auto& x) { return x.has_value(); }))
      return absl::OkStatus();
    std::vector<std::vector<double>> per_rank;
    int64_t wrong = 0, checked = 0;
    for (const auto& x : got[i]) {
      per_rank.emplace_back(x->iteration_seconds().begin(), x->iteration_seconds().end());
      wrong += x->wrong_elements();
      checked += x->checked_elements();
    }
    auto row = AggregateRow(spec.op(), got[i][0]->size_bytes(), per_rank);
    if (!row.ok()) return absl::InternalError(std::string(row.status().message()));
    row->set_backend(group.backend());
    *row->mutable_devices() = group.devices();
    row->set_group(group.id());
    row->set_count(got[i][0]->count());
    row->set_wrong_elements(wrong);
    row->set_checked_elements(checked);
    row->set_timer(got[i][0]->timer());
    *result->add_rows() = *row;
    if (deps.metrics) {
      deps.metrics->ObserveCollective(
          CollectiveOpName(spec.op()), BackendName(group.backend()), world, row->size_bytes(),
          row->busbw_gbps() * 1e9,
          {row->iteration_seconds().begin(), row->iteration_seconds().end()});
    }
    if (cb.on_row) cb.on_row(*row);
    return absl::OkStatus();
  };

  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      absl::Status row_error;
      const RunEnd end = workers[r]->Run(request, calls, [&](const internal::WorkerEvent& e) {
        if (!e.has_collective_size() || !row_error.ok()) return;
        row_error = add_size(r, e.collective_size());
        if (!row_error.ok()) calls.Cancel();
      });
      bool failed;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!row_error.ok()) {
          terminal[r] = row_error;
        } else if (end.last.has_value() && end.last->has_result()) {
          terminal[r] = absl::OkStatus();
          if (!result->has_versions())
            *result->mutable_versions() = end.last->result().collective().versions();
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
    std::vector<std::string> pids;
    for (const auto& w : workers) pids.push_back(absl::StrCat(w->pid()));
    const std::string reason = absl::StrCat(
        "no progress for ", deadline_seconds, " s (the job's progress deadline) while ",
        progress.doing(), "; the member workers (pids ", absl::StrJoin(pids, ", "),
        ") were killed and are being restarted");
    deps.groups->MarkBroken(group.id(), reason);
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
      const std::string how = deps.workers->WaitForExit(group.devices(r), workers[r]->generation(),
                                                        wait ? left : std::chrono::milliseconds(0));
      if (how.empty()) continue;
      const std::string reason =
          absl::StrCat("the worker for ", group.devices(r), " (rank ", r, ", pid ",
                       workers[r]->pid(), ") ", how, " during a collective");
      deps.groups->MarkBroken(group.id(), reason);
      return {absl::FailedPreconditionError(absl::StrCat(
          "group ", group.id(), " (", BackendName(group.backend()), " on ",
          absl::StrJoin(group.devices(), ","), ") broke while this job ran: ", reason,
          "; the worker is being restarted; re-create the group "
          "(benchctl groups create --devices ",
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
      failure = absl::UnavailableError(
          absl::StrCat("lost the worker for ", group.devices(r), " (rank ", r,
                       ") during the collective: ", transport[r].message()));
    }
  }
  if (failure) {
    deps.groups->MarkBroken(group.id(), std::string(failure->message()));
    return {absl::Status(failure->code(),
                         absl::StrCat("group ", group.id(), " is broken: ", failure->message()))};
  }
  for (int r = 0; r < world; ++r) {
    if (absl::IsCancelled(*terminal[r])) return {absl::CancelledError("cancelled while running")};
  }
  return {absl::OkStatus()};
}

}  // namespace

absl::StatusOr<std::vector<std::string>> CollectiveJobDevices(
    const v1::CollectiveSpec& spec, GroupRegistry* groups, const std::vector<std::string>& served) {
  std::set<std::string> all;
  for (int i = 0; i < spec.targets_size(); ++i) {
    const v1::CollectiveTarget& t = spec.targets(i);
    if (!t.group().empty()) {
      auto g = groups->Get(t.group());
      if (!g.ok()) return g.status();
      if (g->state() == v1::GROUP_STATE_BROKEN) {
        return absl::FailedPreconditionError(absl::StrCat(
            "group ", g->id(), " is broken: ", g->broken_reason(),
            "; re-create it (benchctl groups create --devices ", absl::StrJoin(g->devices(), ","),
            " --backend ", BackendName(g->backend()), ")"));
      }
      all.insert(g->devices().begin(), g->devices().end());
      continue;
    }
    v1::CollectiveBackend backend = t.backend();
    std::vector<std::string> devices(t.devices().begin(), t.devices().end());
    if (devices.size() >= 2) {
      if (auto s = groups->CheckMembers(devices, &backend,
                                        absl::StrCat("collective.targets[", i, "].devices"));
          !s.ok()) {
        return s;
      }
    }
    for (const auto& d : devices) {
      if (auto s =
              CheckServedDevice(absl::StrCat("collective.targets[", i, "].devices"), d, served);
          !s.ok()) {
        return s;
      }
    }
    all.insert(devices.begin(), devices.end());
  }
  return std::vector<std::string>(all.begin(), all.end());
}

void RunCollectiveJob(const CollectiveJobDeps& deps, v1::Job* job,
                      const CollectiveJobCallbacks& cb) {
  const v1::CollectiveSpec& spec = job->spec().collective();
  v1::CollectiveResult result;
  *result.mutable_spec() = spec;
  auto fail = [&](const absl::Status& s) {
    job->set_state(absl::IsCancelled(s) ? v1::JOB_STATE_CANCELLED : v1::JOB_STATE_FAILED);
    job->set_error_code(static_cast<int>(s.code()));
    job->set_error_message(std::string(s.message()));
    if (result.rows_size() > 0)
      *job->mutable_result()->mutable_collective() = result;  // what did finish
  };
  for (const v1::CollectiveTarget& target : CollectiveSeries(spec)) {
    if (cb.cancel_requested && cb.cancel_requested())
      return fail(absl::CancelledError("cancelled while running"));
    if (cb.stopping && cb.stopping()) {
      job->set_state(v1::JOB_STATE_INTERRUPTED);
      job->set_error_code(static_cast<int>(absl::StatusCode::kAborted));
      job->set_error_message("the daemon stopped while this job was running");
      return;
    }
    v1::CollectiveGroupUse use;
    absl::StatusOr<v1::Group> group = absl::UnknownError("");
    if (!target.group().empty()) {
      group = deps.groups->Acquire(target.group());
      use.set_was_resident(true);
    } else {
      const std::vector<std::string> devices(target.devices().begin(), target.devices().end());
      if (auto resident = deps.groups->FindReady(devices, target.backend())) {
        group = deps.groups->Acquire(resident->id());
        use.set_was_resident(true);
      }
      if (!group.ok()) {
        v1::CreateGroupRequest req;
        *req.mutable_devices() = target.devices();
        req.set_backend(target.backend());
        req.set_timeout_seconds(spec.timeout_seconds());
        if (cb.log) {
          cb.log(absl::StrCat("setting up a transient ", BackendName(target.backend()),
                              " group on ", absl::StrJoin(devices, ",")));
        }
        auto made = deps.groups->Create(req, /*transient=*/true);
        if (!made.ok()) {
          return fail(absl::Status(
              made.status().code(),
              absl::StrCat("setting up a transient ", BackendName(target.backend()), " group on ",
                           absl::StrJoin(devices, ","), ": ", made.status().message())));
        }
        use.set_transient(true);
        use.set_setup_seconds(made->setup_seconds());
        group = deps.groups->Acquire(made->id());
      }
    }
    if (!group.ok()) return fail(group.status());
    use.set_group(group->id());
    use.set_backend(group->backend());
    *use.mutable_devices() = group->devices();
    *result.add_groups() = use;
    if (cb.log) {
      cb.log(absl::StrCat(
          CollectiveOpName(spec.op()), " on group ", group->id(), " (",
          BackendName(group->backend()), ", ", absl::StrJoin(group->devices(), ","), ")",
          use.was_resident() ? ", resident: no set-up"
                             : absl::StrCat(", set up in ", use.setup_seconds(), " s")));
    }
    const Outcome out = RunSeries(deps, *job, *group, cb, &result);
    deps.groups->Release(group->id());
    if (use.transient()) {
      // The job's own group: a failure to drop it is worth a line, not the job.
      if (auto dropped = deps.groups->Destroy(group->id()); !dropped.ok() && cb.log) {
        cb.log(absl::StrCat("could not drop the job's transient group ", group->id(), ": ",
                            dropped.status().message()));
      }
    }
    if (out.interrupted) {
      job->set_state(v1::JOB_STATE_INTERRUPTED);
      job->set_error_code(static_cast<int>(absl::StatusCode::kAborted));
      job->set_error_message(std::string(out.status.message()));
      return;
    }
    if (!out.status.ok()) return fail(out.status);
  }
  for (const auto& row : result.rows())
    result.set_wrong_elements(result.wrong_elements() + row.wrong_elements());
  for (v1::CollectivePlot& plot : RenderCollectivePlots(result)) {
    if (!deps.artifacts_dir.empty()) {
      const std::filesystem::path dir = std::filesystem::path(deps.artifacts_dir) / job->id();
      const std::filesystem::path file = dir / (plot.name() + ".svg");
      // 0700 folder, 0600 file (common/artifacts.h).
      if (MakeDirs(dir.string()).ok() && WriteFileAtomically(file.string(), plot.svg()).ok()) {
        plot.set_artifact(file.string());
      }
    }
    *result.add_plots() = std::move(plot);
  }
  job->set_state(v1::JOB_STATE_SUCCEEDED);
  *job->mutable_result()->mutable_collective() = std::move(result);
}

}  // namespace benchd::server
