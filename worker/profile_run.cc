#include "worker/profile_run.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/profiler/collection.h>

#include <ActivityType.h>

#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/artifacts.h"
#include "common/model_config.h"
#include "common/profile_analysis.h"
#include "worker/benchmark.h"
#include "worker/device_info.h"
#include "worker/kineto_session.h"

namespace benchd::worker {
namespace {

namespace prof = torch::profiler::impl;
using torch::autograd::profiler::ProfilerResult;

// The activities to record: the spec's, or CPU (+ CUDA on a GPU worker).
absl::StatusOr<std::set<prof::ActivityType>> Activities(const v1::ProfileSpec& spec,
                                                        const WorkerDevice& dev,
                                                        v1::ProfileResult* result) {
  std::set<prof::ActivityType> out;
  if (spec.activities().empty()) {
    out.insert(prof::ActivityType::CPU);
    if (dev.is_cuda()) out.insert(prof::ActivityType::CUDA);
  }
  for (int a : spec.activities()) {
    if (a == v1::PROFILER_ACTIVITY_CPU) out.insert(prof::ActivityType::CPU);
    if (a == v1::PROFILER_ACTIVITY_CUDA) {
      if (!dev.is_cuda()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "profile.activities: cuda needs a CUDA device; this worker is ", dev.name));
      }
      out.insert(prof::ActivityType::CUDA);
    }
  }
  for (prof::ActivityType a : out) {
    result->mutable_spec()->add_activities(
        a == prof::ActivityType::CUDA ? v1::PROFILER_ACTIVITY_CUDA : v1::PROFILER_ACTIVITY_CPU);
  }
  return out;
}

// Model FLOPs per step of the ranges that have them.
std::map<std::string, double> RangeFlops(const v1::BenchmarkSpec& step) {
  const v1::ModelConfig& m = step.model();
  const int64_t b = step.batch_size(), t = step.context_length();
  const double forward = ForwardFlops(m, b, t);
  std::map<std::string, double> flops = {{"step", StepFlops(m, step.mode(), b, t)},
                                         {"forward", forward}};
  if (step.mode() != v1::BENCHMARK_MODE_FORWARD) flops["backward"] = 2 * forward;
  const AttentionFlops a = ForwardAttentionFlops(m, b, t);
  flops["attention"] = a.total();
  if (step.attention() == v1::ATTENTION_IMPL_FAITHFUL) {
    flops["attention.scores"] = a.scores;
    flops["attention.mask"] = a.mask;
    flops["attention.softmax"] = a.softmax;
    flops["attention.weighted_sum"] = a.weighted_sum;
  }
  return flops;
}

}  // namespace

absl::StatusOr<v1::ProfileResult> RunProfile(const v1::ProfileSpec& spec, ModelCache& cache,
                                             const std::string& job_artifacts_dir,
                                             const ProfileHooks& hooks) {
  const WorkerDevice& dev = cache.device();
  v1::ProfileResult result;
  *result.mutable_spec() = spec;
  result.mutable_spec()->clear_activities();  // written out by Activities
  auto activities = Activities(spec, dev, &result);
  if (!activities.ok()) return activities.status();
  const bool device_rows = activities->count(prof::ActivityType::CUDA) > 0;
  auto log = [&](const std::string& line) {
    if (hooks.log) hooks.log(line);
  };

  BenchmarkHooks bench_hooks;
  bench_hooks.on_step = hooks.on_step;
  bench_hooks.cancelled = hooks.cancelled;

  // 1. Unprofiled: what the profiled steps are compared with.
  const v1::BenchmarkSpec& step = spec.step();
  log(absl::StrCat(
      "unprofiled run: ", step.warmup_auto() ? "auto" : absl::StrCat(step.warmup_steps()),
      " warm-up + ", step.measure_steps(), " steps"));
  auto unprofiled = RunBenchmark(step, cache, bench_hooks);
  if (!unprofiled.ok()) return unprofiled.status();

  // 2. Profiled: one warm-up step (the model, its state and the allocator's
  // cache are warm from the first run), then the profiled steps.
  v1::BenchmarkSpec profiled_step = step;
  profiled_step.clear_warmup_auto();
  profiled_step.clear_warmup_max_steps();
  profiled_step.set_warmup_steps(1);
  profiled_step.set_measure_steps(spec.profile_steps());
  prof::ProfilerConfig config(prof::ProfilerState::KINETO, spec.record_shapes(),
                              spec.profile_memory(), /*with_stack=*/false);
  KinetoSession session(config, *activities);
  bench_hooks.on_measure_start = [&] { session.Start(); };
  bench_hooks.on_measure_end = [&] { session.Stop(); };
  log(absl::StrCat("profiled run: 1 warm-up + ", spec.profile_steps(), " profiled steps (",
                   device_rows ? "CPU and CUDA" : "CPU", " activities)"));
  auto profiled = RunBenchmark(profiled_step, cache, bench_hooks);
  if (!profiled.ok()) return profiled.status();
  if (!session.result()) {
    return absl::InternalError("profile: the profiled run ended without a profiler result");
  }

  // 3. Analysis, then the trace (Kineto's save consumes its trace).
  ProfileAnalysisInput in;
  in.events = FlattenProfile(session.result()->event_tree());
  in.steps = spec.profile_steps();
  in.device_rows = device_rows;
  in.flops_per_step = RangeFlops(step);
  const ProfileAnalysis analysis = AnalyzeProfile(in);
  if (absl::Status s = MakeDirs(job_artifacts_dir); !s.ok()) return s;
  const std::string trace_path = absl::StrCat(job_artifacts_dir, "/", kTraceArtifact);
  session.result()->save(trace_path);

  result.set_device(dev.name);
  result.set_device_name(dev.description);
  result.set_parameter_count(unprofiled->parameter_count());
  result.set_kernel_source(device_rows ? "cuda_kernels" : "cpu_operator_self_time");
  for (const v1::ProfileRange& r : analysis.ranges) *result.add_ranges() = r;
  result.set_unattributed_kernels(analysis.unattributed_kernels);
  result.set_unattributed_kernel_seconds(analysis.unattributed_kernel_seconds);
  *result.mutable_unprofiled_step() = unprofiled->step();
  *result.mutable_profiled_step() = profiled->step();
  if (unprofiled->step().median() > 0) {
    result.set_profiler_overhead(profiled->step().median() / unprofiled->step().median());
  }
  // Which engine ran the step, as the benchmark says.
  result.mutable_spec()->mutable_step()->set_autograd(unprofiled->spec().autograd());
  *result.mutable_unprofiled() = *std::move(unprofiled);
  result.set_trace_artifact(kTraceArtifact);
  result.add_artifacts(kTraceArtifact);
  result.set_artifacts_dir(job_artifacts_dir);
  result.set_trace_events(static_cast<int64_t>(in.events.size()));
  *result.mutable_versions() = WorkerVersions();
  return result;
}

}  // namespace benchd::worker
