#include "server/jobs/ddp_job.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/artifacts.h"
#include "common/collective_math.h"
#include "common/ddp_model.h"
#include "common/ddp_spec.h"
#include "common/ddp_timeline.h"
#include "common/stats.h"
#include "server/jobs/collective_job.h"

namespace benchd::server {

absl::StatusOr<v1::DdpRow> AggregateDdpRow(const std::vector<internal::DdpRankRun>& ranks,
                                           const v1::DdpSpec& spec, double compute_only_median) {
  if (ranks.empty()) return absl::InternalError("a data-parallel run with no ranks");
  const int run = ranks[0].run();
  const std::vector<DdpRunSpec> runs = DdpRuns(spec);
  if (run < 0 || run > static_cast<int>(runs.size())) {
    return absl::InternalError(absl::StrCat("a worker sent run ", run, " of ", runs.size()));
  }
  v1::DdpRow row;
  if (run > 0) {
    const DdpRunSpec& r = runs[run - 1];
    row.set_variant(r.variant);
    if (DdpVariantTakesBuckets(r.variant)) row.set_bucket_mb(r.bucket_mb);
    row.set_optimizer(r.optimizer);
    row.set_gradient_compression(r.compression);
  } else {
    row.set_optimizer(v1::DDP_OPTIMIZER_ADAMW);
  }
  const int steps = ranks[0].step_seconds_size();
  for (const auto& r : ranks) {
    if (r.step_seconds_size() != steps) {
      return absl::InternalError(absl::StrCat("rank ", r.rank().rank(), " timed ",
                                              r.step_seconds_size(), " steps of run ", run,
                                              ", rank 0 ", steps));
    }
  }
  // A step takes as long as its slowest rank.
  for (int s = 0; s < steps; ++s) {
    double slowest = 0;
    for (const auto& r : ranks) slowest = std::max(slowest, r.step_seconds(s));
    row.add_step_seconds(slowest);
  }
  *row.mutable_step() = ComputeStats({row.step_seconds().begin(), row.step_seconds().end()});
  if (run > 0) {
    row.set_exposed_comm_seconds(row.step().median() - compute_only_median);
    if (row.step().median() > 0) {
      row.set_exposed_comm_fraction(row.exposed_comm_seconds() / row.step().median());
    }
  }
  row.set_calls_per_step(ranks[0].calls_per_step());
  row.set_bytes_per_step(ranks[0].bytes_per_step());
  row.set_buckets(ranks[0].buckets());
  bool agree = true;
  for (const auto& r : ranks) {
    *row.add_ranks() = r.rank();
    agree = agree && r.parameter_sum() == ranks[0].parameter_sum() &&
            r.parameter_sum_sq() == ranks[0].parameter_sum_sq();
    row.set_peak_memory_bytes(std::max(row.peak_memory_bytes(), r.rank().peak_memory_bytes()));
    row.set_backward_peak_memory_bytes(
        std::max(row.backward_peak_memory_bytes(), r.rank().backward_peak_memory_bytes()));
    row.set_optimizer_peak_memory_bytes(
        std::max(row.optimizer_peak_memory_bytes(), r.rank().optimizer_peak_memory_bytes()));
    row.set_optimizer_state_bytes(
        std::max(row.optimizer_state_bytes(), r.rank().optimizer_state_bytes()));
  }
  // The compute-only run averages nothing: each rank trains apart.
  row.set_ranks_agree(run > 0 && agree);
  row.set_unsharded_optimizer_state_bytes(8 * ranks[0].parameter_count());
  row.set_loss(ranks[0].loss());
  return row;
}

absl::StatusOr<std::vector<std::string>> DdpJobDevices(v1::DdpSpec* spec, GroupRegistry* groups,
                                                       const std::vector<std::string>& served) {
  v1::CollectiveSpec as_collective;
  *as_collective.add_targets() = spec->target();
  auto devices = CollectiveJobDevices(as_collective, groups, served);
  if (!devices.ok()) {
    // Named as this request names them.
    return absl::Status(
        devices.status().code(),
        absl::StrReplaceAll(devices.status().message(), {{"collective.targets[0]", "ddp.target"}}));
  }
  int world = spec->target().devices_size();
  if (!spec->target().group().empty()) {
    auto g = groups->Get(spec->target().group());
    if (!g.ok()) return g.status();
    world = g->devices_size();
  }
  if (auto s = ResolveDdpBatch(world, spec); !s.ok()) return s;
  return devices;
}

namespace {

// The overhead model's input from rank 0's compute-only run.
BackwardTiming BackwardTimingOf(const internal::DdpRankRun& run) {
  BackwardTiming b;
  b.param_bytes.assign(run.param_bytes().begin(), run.param_bytes().end());
  b.param_ready_seconds.assign(run.param_ready_seconds().begin(), run.param_ready_seconds().end());
  b.backward_seconds = run.backward_seconds();
  return b;
}

constexpr char kTimelineArtifact[] = "ddp-timeline.svg";

}  // namespace

void RunDdpJob(GroupRegistry* groups, Workers* workers, const std::string& artifacts_dir,
               v1::Job* job, const DdpJobCallbacks& cb) {
  const v1::DdpSpec& spec = job->spec().ddp();
  v1::DdpResult result;
  *result.mutable_spec() = spec;
  auto fail = [&](const absl::Status& s) {
    job->set_state(absl::IsCancelled(s) ? v1::JOB_STATE_CANCELLED : v1::JOB_STATE_FAILED);
    job->set_error_code(static_cast<int>(s.code()));
    job->set_error_message(std::string(s.message()));
    // What did finish.
    if (result.has_compute_only()) *job->mutable_result()->mutable_ddp() = result;
  };
  if (cb.stopping && cb.stopping()) {
    job->set_state(v1::JOB_STATE_INTERRUPTED);
    job->set_error_code(static_cast<int>(absl::StatusCode::kAborted));
    job->set_error_message("the daemon stopped while this job was running");
    return;
  }
  auto held = HoldGroup(groups, spec.target(), spec.timeout_seconds(), cb);
  if (!held.ok()) return fail(held.status());
  const v1::Group& group = held->group;
  *result.mutable_group() = held->use;
  result.set_world_size(group.devices_size());
  result.set_global_batch_size(spec.global_batch_size());
  if (cb.log) {
    cb.log(absl::StrCat(
        "data-parallel training of ",
        spec.step().model().preset().empty() ? "the model" : spec.step().model().preset(),
        " on group ", group.id(), " (", BackendName(group.backend()), ", ",
        absl::StrJoin(group.devices(), ","), ")",
        held->use.was_resident() ? ", resident: no set-up"
                                 : absl::StrCat(", set up in ", held->use.setup_seconds(), " s")));
  }

  internal::RunRequest request;
  request.set_job_id(job->id());
  *request.mutable_spec() = job->spec();
  request.mutable_ddp()->set_group(group.id());
  request.mutable_ddp()->set_timeout_seconds(group.timeout_seconds());

  const int world = group.devices_size();
  const size_t runs = DdpRuns(spec).size() + 1;
  std::vector<std::vector<std::optional<internal::DdpRankRun>>> got(
      runs, std::vector<std::optional<internal::DdpRankRun>>(world));
  std::optional<absl::Status> diverged;
  BackwardTiming backward;
  auto on_event = [&](int r, const internal::WorkerEvent& e, std::string* doing) -> absl::Status {
    if (e.has_log()) {
      *doing = absl::StrCat(e.log(), " on rank ", r);
      return absl::OkStatus();
    }
    if (!e.has_ddp_run()) return absl::OkStatus();
    const int run = e.ddp_run().run();
    if (run < 0 || run >= static_cast<int>(runs)) {
      return absl::InternalError(absl::StrCat("rank ", r, " sent run ", run, " of ", runs - 1));
    }
    got[run][r] = e.ddp_run();
    *doing = absl::StrCat("finishing run ", run, " on rank ", r);
    if (!std::all_of(got[run].begin(), got[run].end(), [](const auto& x) { return x.has_value(); }))
      return absl::OkStatus();
    std::vector<internal::DdpRankRun> ranks;
    for (auto& x : got[run]) ranks.push_back(*x);
    if (run == 0) {
      result.set_timer(ranks[0].timer());
      result.set_parameter_count(ranks[0].parameter_count());
      result.set_device_name(ranks[0].device_name());
      backward = BackwardTimingOf(ranks[0]);
      auto model = MakeOverheadModel(
          backward, {ranks[0].sweep_bytes().begin(), ranks[0].sweep_bytes().end()},
          {ranks[0].sweep_seconds().begin(), ranks[0].sweep_seconds().end()});
      if (model.ok()) {
        *result.mutable_overhead_model() = *model;
      } else {
        result.mutable_overhead_model()->set_unavailable(std::string(model.status().message()));
      }
    }
    auto row = AggregateDdpRow(ranks, spec, run == 0 ? 0 : result.compute_only().step().median());
    if (!row.ok()) return row.status();
    // The worker knows its device by its own name ("cpu:0" on every node);
    // the group's list names it as the job does ("node1/cpu:0").
    for (v1::DdpRank& k : *row->mutable_ranks()) {
      if (k.rank() >= 0 && k.rank() < group.devices_size()) k.set_device(group.devices(k.rank()));
    }
    PredictRow(backward, result.overhead_model(), &*row);
    const std::string label = DdpRunLabel(DdpRunOf(*row));
    if (run == 0) {
      *result.mutable_compute_only() = *row;
    } else {
      *result.add_rows() = *row;
    }
    if (cb.on_row) cb.on_row(*row);
    if (run > 0 && !row->ranks_agree()) {
      std::vector<std::string> sums;
      for (const auto& x : ranks) sums.push_back(absl::StrCat(x.parameter_sum()));
      // Every rank goes on (stopping one mid-run would hang the others); the
      // job fails at its end.
      if (!diverged) {
        diverged = absl::InternalError(
            absl::StrCat("the ranks' parameters differ after run ", run, " (", label,
                         "): their sums are [", absl::StrJoin(sums, ", "),
                         "]; every rank must hold the same parameters after averaged gradients"));
      }
    }
    return absl::OkStatus();
  };
  auto on_result = [&](int, const v1::JobResult& r) {
    if (!result.has_versions()) *result.mutable_versions() = r.ddp().versions();
  };
  const GroupCallOutcome out = CallEveryMember(workers, groups, *job, group, request,
                                               "data-parallel training", cb, on_event, on_result);
  ReleaseGroup(groups, *held, cb);
  if (out.interrupted) {
    job->set_state(v1::JOB_STATE_INTERRUPTED);
    job->set_error_code(static_cast<int>(absl::StatusCode::kAborted));
    job->set_error_message(std::string(out.status.message()));
    return;
  }
  CompareBestBucket(&result);
  // The picture, on the daemon's disk beside the traces of its own ranks.
  if (const std::string svg = RenderDdpTimelines(result); !svg.empty() && !artifacts_dir.empty()) {
    const std::string dir = absl::StrCat(artifacts_dir, "/", job->id());
    if (MakeDirs(dir).ok() &&
        WriteFileAtomically(absl::StrCat(dir, "/", kTimelineArtifact), svg).ok()) {
      result.set_timeline_artifact(kTimelineArtifact);
    }
  }
  if (!out.status.ok()) return fail(out.status);
  if (diverged) return fail(*diverged);
  job->set_state(v1::JOB_STATE_SUCCEEDED);
  *job->mutable_result()->mutable_ddp() = std::move(result);
}

}  // namespace benchd::server
