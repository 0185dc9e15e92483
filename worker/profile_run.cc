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

// The profiler's tree as ProfileEvents, each result once, parents before
// children. Allocation and other event kinds carry no time to attribute and
// are left out (they stay in the trace); the children of one left out hang
// from its parent.
std::vector<ProfileEvent> Flatten(const std::vector<std::shared_ptr<prof::Result>>& tree) {
  std::vector<ProfileEvent> events;
  std::unordered_map<const prof::Result*, int> index;
  std::vector<std::pair<const prof::Result*, int>> stack;  // (result, parent index)
  auto visit_from = [&](const prof::Result* top) {
    stack.push_back({top, -1});
    while (!stack.empty()) {
      auto [r, parent] = stack.back();
      stack.pop_back();
      if (!index.try_emplace(r, -1).second) continue;
      ProfileEvent e;
      bool keep = true;
      switch (r->tag()) {
        case prof::EventType::TorchOp: {
          const auto& op = std::get<prof::ExtraFields<prof::EventType::TorchOp>>(r->extra_fields_);
          e.kind = op.scope_ == at::RecordScope::USER_SCOPE ? ProfileEvent::Kind::kRange
                                                            : ProfileEvent::Kind::kOperator;
          break;
        }
        case prof::EventType::Kineto:
          // Kineto also reports the named ranges as spans on the device
          // (GPU_USER_ANNOTATION) and CUPTI's own overhead: neither is work
          // of the device, and counting them would count kernels twice.
          switch (r->kinetoType()) {
            case libkineto::ActivityType::CUDA_RUNTIME:
            case libkineto::ActivityType::CUDA_DRIVER:
              e.kind = ProfileEvent::Kind::kRuntime;
              break;
            case libkineto::ActivityType::CONCURRENT_KERNEL:
            case libkineto::ActivityType::GPU_MEMCPY:
            case libkineto::ActivityType::GPU_MEMSET:
              e.kind = ProfileEvent::Kind::kDevice;
              break;
            default:
              keep = false;
          }
          break;
        default:
          keep = false;
      }
      int self = parent;
      if (keep) {
        e.name = r->name();
        e.start_ns = r->start_time_ns_;
        e.end_ns = r->endTimeNS();
        e.thread = r->start_tid_;
        e.parent = parent;
        self = static_cast<int>(events.size());
        events.push_back(std::move(e));
      }
      index[r] = self;
      for (auto it = r->children_.rbegin(); it != r->children_.rend(); ++it) {
        stack.push_back({it->get(), self});
      }
    }
  };
  for (const auto& r : tree) {
    const prof::Result* top = r.get();
    while (auto p = top->parent_.lock()) top = p.get();
    if (!index.count(top)) visit_from(top);
  }
  // A kernel's runtime call sits in the tree where its timestamps nest it, and
  // CUPTI's host clock is not the operators' clock: a call at the edge of a
  // short range (attention.scores) can nest just outside it. Kineto also links
  // each kernel to the operator that launched it by correlation id (the
  // operator innermost at the launch): that link decides the call's operator.
  for (const auto& [r, i] : index) {
    if (i < 0 || r->tag() != prof::EventType::Kineto ||
        events[i].kind != ProfileEvent::Kind::kDevice) {
      continue;
    }
    const int call = events[i].parent;
    if (call < 0 || events[call].kind != ProfileEvent::Kind::kRuntime) continue;
    const auto& kineto = std::get<prof::ExtraFields<prof::EventType::Kineto>>(r->extra_fields_);
    const auto linked = kineto.linked_activity_.lock();
    if (!linked || linked->tag() != prof::EventType::TorchOp) continue;
    const auto op = index.find(linked.get());
    if (op != index.end() && op->second >= 0 && events[op->second].thread == events[call].thread) {
      events[call].parent = op->second;
    }
  }
  return events;
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

// Turns the profiler off on every way out of the profiled run.
class ProfilerSession {
 public:
  ProfilerSession(prof::ProfilerConfig config, std::set<prof::ActivityType> activities)
      : config_(std::move(config)), activities_(std::move(activities)) {
    // CUPTI's set-up happens here, before the warm-up step, not in a profiled one.
    torch::autograd::profiler::prepareProfiler(config_, activities_);
  }
  ~ProfilerSession() {
    if (!on_) return;
    try {
      torch::autograd::profiler::disableProfiler();
    } catch (const std::exception&) {
      // Already failing; nothing more to save.
    }
  }
  void Start() {
    torch::autograd::profiler::enableProfiler(config_, activities_);
    on_ = true;
  }
  void Stop() {
    result_ = torch::autograd::profiler::disableProfiler();
    on_ = false;
  }
  std::unique_ptr<ProfilerResult>& result() { return result_; }

 private:
  prof::ProfilerConfig config_;
  std::set<prof::ActivityType> activities_;
  bool on_ = false;
  std::unique_ptr<ProfilerResult> result_;
};

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
  ProfilerSession session(config, *activities);
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
  in.events = Flatten(session.result()->event_tree());
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
