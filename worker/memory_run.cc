#include "worker/memory_run.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/artifacts.h"
#include "common/job_spec.h"
#include "common/memory_analysis.h"
#include "common/memory_estimate.h"
#include "common/memory_svg.h"
#include "common/model_config.h"
#include "worker/benchmark.h"
#include "worker/device_info.h"
#include "worker/memory_snapshot.h"

#if BENCHD_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/cuda/memory_snapshot.h>
#endif

namespace benchd::worker {
namespace {

// The SVGs ride in the result while they stay this small together; beyond,
// they are only artifacts (a Job is one SQLite row and one gRPC message).
constexpr size_t kMaxSvgBytesInResult = 2 << 20;

std::string Title(const v1::ModelConfig& model, const v1::BenchmarkSpec& cell) {
  return absl::StrCat(model.preset().empty() ? "custom model" : model.preset(), " ",
                      ModeName(cell.mode()), " ", PrecisionName(cell.precision()), ", batch ",
                      cell.batch_size(), " x context ", cell.context_length(), ": ",
                      "active memory over ", cell.measure_steps(), " recorded step",
                      cell.measure_steps() == 1 ? "" : "s");
}

// Fills the run's figures from a snapshot pickle and writes the artifacts.
absl::Status Summarize(const std::string& pickled, const v1::MemorySpec& spec,
                       const v1::BenchmarkSpec& cell, int device, const std::string& dir,
                       bool sweep, v1::MemoryRun& run, std::string* svg_out,
                       std::vector<std::string>& artifacts) {
  const std::string snapshot_name = SnapshotArtifactName(run.name(), sweep);
  if (absl::Status s = WriteFileAtomically(dir + "/" + snapshot_name, pickled); !s.ok()) return s;
  artifacts.push_back(snapshot_name);
  run.set_snapshot_artifact(snapshot_name);

  auto snapshot = ParseSnapshotPickle(pickled);
  if (!snapshot.ok()) return absl::InternalError(snapshot.status().message());
  memory::AnalysisOptions options;
  options.device = device;
  options.top_allocations = static_cast<int>(spec.top_allocations());
  auto a = memory::Analyze(*snapshot, options);
  if (!a.ok()) return absl::InternalError(a.status().message());
  run.set_trace_entries(a->entries);
  run.set_trace_wrapped(a->entries >= spec.max_entries());
  run.set_peak_allocated_bytes(a->peak_allocated);
  run.set_peak_reserved_bytes(a->peak_reserved);
  run.set_baseline_allocated_bytes(a->baseline_allocated);
  run.set_baseline_reserved_bytes(a->baseline_reserved);
  for (const memory::PhaseStats& p : a->phases) {
    if (!p.seen) continue;
    v1::MemoryPhase* out = run.add_phases();
    out->set_name(p.name);
    out->set_start_allocated_bytes(p.start_allocated);
    out->set_start_reserved_bytes(p.start_reserved);
    out->set_peak_allocated_bytes(p.peak_allocated);
    out->set_peak_reserved_bytes(p.peak_reserved);
  }
  for (const memory::LargeAllocation& l : a->largest) {
    v1::MemoryAllocation* out = run.add_largest_allocations();
    out->set_size_bytes(l.size);
    out->set_phase(l.phase);
    out->set_count(l.count);
    for (const std::string& f : l.frames) out->add_frames(f);
    out->set_origin(l.origin);
  }

  memory::TimelineOptions t;
  t.title = Title(spec.step().model(), cell);
  t.subtitle = absl::StrCat("one residual activation ", memory::HumanBytes(run.activation_bytes()),
                            run.out_of_memory() ? "; ran OUT OF MEMORY" : "");
  *svg_out = memory::RenderTimelineSvg(*snapshot, *a, t);
  const std::string timeline_name = TimelineArtifactName(run.name(), sweep);
  if (absl::Status s = WriteFileAtomically(dir + "/" + timeline_name, *svg_out); !s.ok()) return s;
  artifacts.push_back(timeline_name);
  run.set_timeline_artifact(timeline_name);
  return absl::OkStatus();
}

#if BENCHD_WITH_CUDA
// History recording for one run; stopped on every way out.
class Recording {
 public:
  explicit Recording(const v1::MemorySpec& spec) : spec_(spec) {}
  ~Recording() { Stop(); }

  void Start() {
    const bool stacks = spec_.stacks() != v1::MEMORY_STACKS_NONE;
    // enabled "all": every event into the ring buffer; context "all" (or
    // none): stacks of the trace's allocs and of the live blocks; stacks
    // "all": with C++ frames (there are no Python ones here). The history of
    // an earlier run is cleared. The allocator also registers a thread-local
    // RecordFunction callback for user scopes: our phases' annotations.
    torch::cuda::_record_memory_history(
        std::optional<std::string>("all"),
        stacks ? std::optional<std::string>("all") : std::nullopt, stacks ? "all" : "python",
        static_cast<size_t>(spec_.max_entries()), /*clearHistory=*/true);
    on_ = true;
  }
  // The pickle while recording is still on (so it holds the whole history).
  std::string Take() { return on_ ? torch::cuda::_memory_snapshot_pickled() : std::string(); }
  void Stop() {
    if (!on_) return;
    on_ = false;
    try {
      torch::cuda::_record_memory_history(std::nullopt);
    } catch (const std::exception&) {
    }
  }
  bool on() const { return on_; }

 private:
  const v1::MemorySpec& spec_;
  bool on_ = false;
};

struct CudaMemory {
  int64_t allocated = 0, reserved = 0, total = 0, free = 0;
  // Peaks since the last reset: requested bytes (the trace's measure),
  // blocks (torch.cuda.max_memory_allocated) and segments.
  int64_t peak_requested = 0, peak_allocated = 0, peak_reserved = 0;
};

CudaMemory CudaMemoryNow(const WorkerDevice& dev) {
  constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(dev.device.index());
  CudaMemory m;
  m.allocated = stats.allocated_bytes[kAll].current;
  m.reserved = stats.reserved_bytes[kAll].current;
  m.peak_requested = stats.requested_bytes[kAll].peak;
  m.peak_allocated = stats.allocated_bytes[kAll].peak;
  m.peak_reserved = stats.reserved_bytes[kAll].peak;
  c10::cuda::CUDAGuard guard(dev.device.index());
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
    m.free = static_cast<int64_t>(free);
    m.total = static_cast<int64_t>(total);
  }
  return m;
}
#endif

}  // namespace

std::string SnapshotArtifactName(const std::string& run_name, bool sweep) {
  return sweep ? absl::StrCat("memory-", run_name, ".pickle") : "memory.pickle";
}

std::string TimelineArtifactName(const std::string& run_name, bool sweep) {
  return sweep ? absl::StrCat("timeline-", run_name, ".svg") : "timeline.svg";
}

absl::StatusOr<v1::MemoryResult> RunMemory(const v1::MemorySpec& spec, ModelCache& cache,
                                           const std::string& job_artifacts_dir,
                                           const MemoryHooks& hooks) {
  const WorkerDevice& dev = cache.device();
  if (!dev.is_cuda()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "memory: needs a CUDA device (it records the CUDA caching allocator's history); this "
        "worker is ",
        dev.name));
  }
#if !BENCHD_WITH_CUDA
  (void)spec;
  (void)job_artifacts_dir;
  (void)hooks;
  return absl::FailedPreconditionError(
      "memory: this benchd-worker was built against a LibTorch without CUDA");
#else
  if (job_artifacts_dir.empty()) {
    return absl::FailedPreconditionError("memory: no artifacts dir to write the snapshot to");
  }
  if (absl::Status s = MakeDirs(job_artifacts_dir); !s.ok()) return s;

  const std::vector<v1::BenchmarkSpec> cells = MemoryRunSpecs(spec, spec.step());
  const bool sweep = cells.size() > 1;
  v1::MemoryResult result;
  *result.mutable_spec() = spec;
  result.set_parameter_count(ParameterCount(spec.step().model()));
  result.set_device(dev.name);
  result.set_device_name(dev.description);
  result.set_artifacts_dir(job_artifacts_dir);
  *result.mutable_versions() = WorkerVersions();
  std::vector<std::string> artifacts;
  std::vector<std::string> svgs;

  for (size_t i = 0; i < cells.size(); ++i) {
    const v1::BenchmarkSpec& cell = cells[i];
    if (hooks.cancelled && hooks.cancelled()) {
      return absl::CancelledError(
          absl::StrCat("cancelled before run ", i + 1, " of ", cells.size()));
    }
    v1::MemoryRun run;
    run.set_name(MemoryRunName(cell));
    *run.mutable_step() = cell;
    run.set_activation_bytes(
        ResidualStreamBytes(cell.batch_size(), cell.context_length(), cell.model().d_model()));
    if (hooks.log) {
      hooks.log(absl::StrCat("memory run ", i + 1, " of ", cells.size(), ": ", run.name()));
    }

    // Its own figures: nothing else resident, the model built fresh.
    cache.EvictAll();
    ReleaseCachedMemory(dev);

    Recording recording(spec);
    std::string pickled;
    std::optional<CudaMemory> at_end, at_oom;
    BenchmarkHooks bh;
    bh.on_step = hooks.on_step;
    bh.cancelled = hooks.cancelled;
    bh.on_measure_start = [&] { recording.Start(); };
    bh.on_measure_end = [&] {
      at_end = CudaMemoryNow(dev);  // peaks since the reset before the first recorded step
      pickled = recording.Take();
      recording.Stop();
    };
    bh.on_out_of_memory = [&] {
      at_oom = CudaMemoryNow(dev);
      pickled = recording.Take();  // the history up to the failure, if recording
      recording.Stop();
    };
    auto r = RunBenchmark(cell, cache, bh);
    recording.Stop();
    if (!r.ok()) {
      if (absl::IsCancelled(r.status())) return r.status();
      if (!absl::IsResourceExhausted(r.status())) {
        return absl::Status(r.status().code(),
                            absl::StrCat("memory run ", run.name(), ": ", r.status().message()));
      }
      run.set_out_of_memory(true);
      run.set_out_of_memory_message(std::string(r.status().message()));
      if (at_oom) {
        run.set_oom_allocated_bytes(at_oom->allocated);
        run.set_oom_reserved_bytes(at_oom->reserved);
        run.set_oom_device_total_bytes(at_oom->total);
        run.set_oom_device_free_bytes(at_oom->free);
      }
    } else if (at_end) {
      run.set_allocator_peak_allocated_bytes(at_end->peak_requested);
      run.set_allocator_peak_reserved_bytes(at_end->peak_reserved);
      run.set_max_memory_allocated_bytes(at_end->peak_allocated);
    }
    std::string svg;
    if (!pickled.empty()) {
      absl::Status s = Summarize(pickled, spec, cell, dev.device.index(), job_artifacts_dir, sweep,
                                 run, &svg, artifacts);
      if (!s.ok() && !run.out_of_memory()) {
        return absl::Status(s.code(), absl::StrCat("memory run ", run.name(), ": ", s.message()));
      }
      // An out-of-memory row keeps its figures even if its partial trace could not be read.
    }
    svgs.push_back(std::move(svg));
    *result.add_runs() = std::move(run);
  }

  size_t svg_bytes = 0;
  for (const std::string& s : svgs) svg_bytes += s.size();
  result.set_timelines_in_result(svg_bytes <= kMaxSvgBytesInResult);
  if (result.timelines_in_result()) {
    for (int i = 0; i < result.runs_size(); ++i) result.mutable_runs(i)->set_timeline_svg(svgs[i]);
  }
  for (const std::string& a : artifacts) result.add_artifacts(a);
  return result;
#endif
}

}  // namespace benchd::worker
