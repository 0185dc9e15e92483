#include "server/jobs/collective_job.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/artifacts.h"
#include "common/collective_math.h"
#include "common/collective_svg.h"
#include "common/job_spec.h"
#include "server/core/devices.h"
#include "server/core/metrics.h"

namespace benchd::server {
namespace {

// One series on one group: Run on every member at once; each size's row goes
// out when every rank has finished it.
GroupCallOutcome RunSeries(const CollectiveJobDeps& deps, const v1::Job& job,
                           const v1::Group& group, const CollectiveJobCallbacks& cb,
                           v1::CollectiveResult* result) {
  const v1::CollectiveSpec& spec = job.spec().collective();
  const int world = group.devices_size();
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

  const int sizes = spec.sizes_bytes_size();
  std::vector<std::vector<std::optional<internal::CollectiveRankSize>>> got(
      sizes, std::vector<std::optional<internal::CollectiveRankSize>>(world));
  std::vector<int> next_size(world, 0);
  // Rank r's figures for its next size (CallEveryMember holds its lock);
  // when every rank has that size, its row goes out. An error when the
  // figures cannot be aggregated.
  auto add_size = [&](int r, const internal::WorkerEvent& e, std::string* doing) -> absl::Status {
    if (!e.has_collective_size()) return absl::OkStatus();
    const int i = next_size[r]++;
    if (i >= sizes) return absl::OkStatus();
    got[i][r] = e.collective_size();
    *doing = i + 1 < sizes ? absl::StrCat("running size ", i + 2, " of ", sizes, " (",
                                          spec.sizes_bytes(i + 1), " bytes) on rank ", r)
                           : absl::StrCat("finishing on rank ", r);
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
  auto add_result = [&](int, const v1::JobResult& r) {
    if (!result->has_versions()) *result->mutable_versions() = r.collective().versions();
  };
  return CallEveryMember(deps.workers, deps.groups, job, group, request, "a collective", cb,
                         add_size, add_result);
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
            "; re-create it (benchctl groups create --device ", absl::StrJoin(g->devices(), ","),
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
    auto held = HoldGroup(deps.groups, target, spec.timeout_seconds(), cb);
    if (!held.ok()) return fail(held.status());
    const v1::Group& group = held->group;
    const v1::CollectiveGroupUse& use = held->use;
    *result.add_groups() = use;
    if (cb.log) {
      cb.log(absl::StrCat(
          CollectiveOpName(spec.op()), " on group ", group.id(), " (", BackendName(group.backend()),
          ", ", absl::StrJoin(group.devices(), ","), ")",
          use.was_resident() ? ", resident: no set-up"
                             : absl::StrCat(", set up in ", use.setup_seconds(), " s")));
    }
    const GroupCallOutcome out = RunSeries(deps, *job, group, cb, &result);
    ReleaseGroup(deps.groups, *held, cb);
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
