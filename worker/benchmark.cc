#include "worker/benchmark.h"

#include <sys/resource.h>

#include <ATen/record_function.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/model_config.h"
#include "common/stats.h"
#include "worker/autocast_guard.h"
#include "worker/device_info.h"
#include "worker/nvtx_range.h"
#include "worker/phase_clock.h"

#if BENCHD_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace benchd::worker {
namespace {

using Clock = std::chrono::steady_clock;

std::optional<at::ScalarType> AutocastDtype(v1::Precision p) {
  switch (p) {
    case v1::PRECISION_BF16: return at::kBFloat16;
    case v1::PRECISION_FP16: return at::kHalf;
    default: return std::nullopt;
  }
}

std::string GiB(int64_t bytes) {
  return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / (1 << 30));
}

// The process's resident-set high-water mark. The kernel keeps one per
// process and cannot reset it, so on CPU "peak" covers the worker's lifetime.
int64_t HostMaxRssBytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports kB
}

// Peak memory over the measured steps.
void ResetPeakMemory(const WorkerDevice& dev) {
#if BENCHD_WITH_CUDA
  if (dev.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(dev.device.index());
#else
  (void)dev;
#endif
}

int64_t PeakMemory(const WorkerDevice& dev) {
#if BENCHD_WITH_CUDA
  if (dev.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(dev.device.index());
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
        .peak;
  }
#endif
  return HostMaxRssBytes();
}

const char* PeakMemorySource(const WorkerDevice& dev) {
  return dev.is_cuda() ? "cuda_caching_allocator" : "host_max_rss";
}

// Memory figures for an out-of-memory message, taken before anything is freed.
std::string MemoryFigures(const WorkerDevice& dev) {
#if BENCHD_WITH_CUDA
  if (dev.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(dev.device.index());
    constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    c10::cuda::CUDAGuard guard(dev.device.index());
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    return absl::StrCat("allocated by PyTorch ", GiB(stats.allocated_bytes[kAll].current),
                        ", reserved by PyTorch ", GiB(stats.reserved_bytes[kAll].current),
                        ", device total ", GiB(static_cast<int64_t>(total)), ", device free ",
                        GiB(static_cast<int64_t>(free)));
  }
#endif
  const v1::Device d = DescribeDevice(dev);
  return absl::StrCat("host memory total ", GiB(d.total_memory_bytes()), ", available ",
                      GiB(d.free_memory_bytes()), ", worker max RSS ", GiB(HostMaxRssBytes()));
}

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// LibTorch's CPU allocator reports failure as a plain c10::Error (only the
// CUDA allocator throws c10::OutOfMemoryError), so it is known by its text
// (c10/core/impl/alloc_cpu.cpp).
bool IsHostOutOfMemory(const c10::Error& e) {
  return e.msg().find("DefaultCPUAllocator: can't allocate memory") != std::string::npos;
}

// One run of one spec. Holds what the error paths need to clean up and to say
// what was going on.
class BenchmarkRun {
 public:
  BenchmarkRun(const v1::BenchmarkSpec& spec, ModelCache& cache, const BenchmarkHooks& hooks)
      : spec_(spec), cache_(cache), dev_(cache.device()), hooks_(hooks) {}

  absl::StatusOr<v1::BenchmarkResult> Run() {
    try {
      return RunOrThrow();
    } catch (const c10::OutOfMemoryError& e) {
      return OutOfMemory(e.what_without_backtrace());
    } catch (const std::bad_alloc& e) {
      return OutOfMemory(e.what());
    } catch (const c10::Error& e) {
      if (IsHostOutOfMemory(e)) return OutOfMemory(e.what_without_backtrace());
      return Failed(e.what_without_backtrace());
    } catch (const std::exception& e) {
      return Failed(e.what());
    }
  }

 private:
  absl::StatusOr<v1::BenchmarkResult> RunOrThrow() {
    const v1::ModelConfig& config = spec_.model();
    const std::string key = ModelCache::Key(dev_.name, config, spec_.precision());
    doing_ = absl::StrCat("building model ", key, " (", ParameterCount(config),
                          " parameters, ", GiB(4 * ParameterCount(config)), " of fp32 weights)");
    bool was_resident = false;
    model_ = cache_.Acquire(config, spec_.precision(), spec_.seed(), &was_resident);

    const int64_t warmup = spec_.warmup_steps(), total = warmup + spec_.measure_steps();
    doing_ = absl::StrCat("making a batch of ", spec_.batch_size(), " x ", spec_.context_length(),
                          " tokens");
    MakeBatch();
    clock_ = MakePhaseClock(dev_, 4);

    v1::BenchmarkResult result;
    for (int64_t i = 0; i < total; ++i) {
      if (hooks_.cancelled && hooks_.cancelled()) {
        Cleanup();
        return absl::CancelledError(absl::StrCat("cancelled before step ", i, " of ", total));
      }
      doing_ = absl::StrCat("running step ", i, " of ", total, i < warmup ? " (warm-up)" : "",
                            ": ", ModeName(spec_.mode()), " ", PrecisionName(spec_.precision()),
                            ", batch ", spec_.batch_size(), " x context ", spec_.context_length(),
                            " on ", key);
      if (i == warmup) {
        model_->model->zero_grad(/*set_to_none=*/true);
        ResetPeakMemory(dev_);
      }
      v1::StepTiming* t = result.add_steps();
      *t = Step(i, i < warmup);
      if (hooks_.on_step) hooks_.on_step(*t, total);
    }
    const int64_t peak = PeakMemory(dev_);
    Cleanup();

    Summarize(result);
    result.set_peak_memory_bytes(peak);
    result.set_peak_memory_source(PeakMemorySource(dev_));
    result.set_parameter_count(model_->parameter_count);
    result.set_model_was_resident(was_resident);
    result.set_model_build_seconds(was_resident ? 0.0 : model_->build_seconds);
    result.set_timer(clock_->name());
    return result;
  }

  void MakeBatch() {
    // Drawn on the CPU from the spec's seed and copied over, so a seed names
    // the same tokens on every device.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(spec_.seed());
    const auto opts = torch::TensorOptions().dtype(torch::kInt64);
    const std::vector<int64_t> shape = {spec_.batch_size(), spec_.context_length()};
    const int64_t vocab = spec_.model().vocab_size();
    inputs_ = torch::randint(0, vocab, shape, gen, opts).to(dev_.device);
    targets_ = torch::randint(0, vocab, shape, gen, opts).to(dev_.device);
  }

  // One synchronized step. Each phase is an NVTX range (for nsys) and a
  // RECORD_USER_SCOPE (for the Kineto profiler); each scope macro declares a
  // variable named `guard`, hence one block per phase.
  v1::StepTiming Step(int64_t index, bool warmup) {
    const v1::BenchmarkMode mode = spec_.mode();
    TransformerLM& model = model_->model;
    model->zero_grad(/*set_to_none=*/true);
    clock_->Reset();
    const auto host_start = Clock::now();
    clock_->Mark();
    torch::Tensor loss;
    {
      NvtxRange nvtx("forward");
      RECORD_USER_SCOPE("forward");
      AutocastGuard autocast(dev_.device.type(), AutocastDtype(spec_.precision()));
      loss = CrossEntropy(model->forward(inputs_), targets_);
    }
    clock_->Mark();
    int marks = 2;
    double backward = 0, optimizer = 0;
    if (mode == v1::MODE_FORWARD_BACKWARD || mode == v1::MODE_TRAIN_STEP) {
      {
        NvtxRange nvtx("backward");
        RECORD_USER_SCOPE("backward");
        loss.backward();
      }
      clock_->Mark();
      ++marks;
    }
    if (mode == v1::MODE_TRAIN_STEP) {
      {
        NvtxRange nvtx("optimizer_step");
        RECORD_USER_SCOPE("optimizer_step");
        model_->optimizer->Step();
      }
      clock_->Mark();
      ++marks;
    }
    Synchronize(dev_);
    const double host = std::chrono::duration<double>(Clock::now() - host_start).count();

    if (marks > 2) backward = clock_->Seconds(1, 2);
    if (marks > 3) optimizer = clock_->Seconds(2, 3);
    v1::StepTiming t;
    t.set_index(index);
    t.set_warmup(warmup);
    t.set_step_seconds(clock_->Seconds(0, marks - 1));
    t.set_host_seconds(host);
    t.set_forward_seconds(clock_->Seconds(0, 1));
    t.set_backward_seconds(backward);
    t.set_optimizer_seconds(optimizer);
    t.set_loss(loss.item<double>());
    return t;
  }

  void Summarize(v1::BenchmarkResult& r) const {
    *r.mutable_model() = spec_.model();
    r.set_mode(spec_.mode());
    r.set_precision(spec_.precision());
    r.set_batch_size(spec_.batch_size());
    r.set_context_length(spec_.context_length());
    r.set_warmup_steps(spec_.warmup_steps());
    r.set_measure_steps(spec_.measure_steps());
    r.set_device(dev_.name);
    r.set_device_name(dev_.description);
    *r.mutable_versions() = WorkerVersions();

    std::vector<double> step, fwd, bwd, opt, host;
    for (const v1::StepTiming& t : r.steps()) {
      if (t.warmup()) continue;
      step.push_back(t.step_seconds());
      fwd.push_back(t.forward_seconds());
      bwd.push_back(t.backward_seconds());
      opt.push_back(t.optimizer_seconds());
      host.push_back(t.host_seconds());
    }
    *r.mutable_step() = ComputeStats(step);
    *r.mutable_forward() = ComputeStats(fwd);
    // Phases the mode does not run stay unset rather than read as "0 s".
    if (spec_.mode() != v1::MODE_FORWARD) *r.mutable_backward() = ComputeStats(bwd);
    if (spec_.mode() == v1::MODE_TRAIN_STEP) *r.mutable_optimizer() = ComputeStats(opt);
    *r.mutable_host_step() = ComputeStats(host);

    const double median = r.step().median();
    const double tokens = static_cast<double>(spec_.batch_size() * spec_.context_length());
    const double flops =
        StepFlops(spec_.model(), spec_.mode(), spec_.batch_size(), spec_.context_length());
    r.set_flops_per_step(flops);
    if (median > 0) {
      r.set_tokens_per_second(tokens / median);
      r.set_tflops_per_second(flops / median / 1e12);
    }
  }

  // Gradients and the batch go; the model (and optimizer state) stays resident.
  void Cleanup() {
    inputs_ = targets_ = torch::Tensor();
    if (model_) {
      model_->model->zero_grad(/*set_to_none=*/true);
      cache_.UpdateBytes(*model_);
    }
  }

  absl::Status OutOfMemory(const std::string& torch_message) {
    const std::string figures = MemoryFigures(dev_);
    const std::string key = ModelCache::Key(dev_.name, spec_.model(), spec_.precision());
    inputs_ = targets_ = torch::Tensor();
    if (model_) model_->model->zero_grad(/*set_to_none=*/true);
    model_.reset();
    const bool evicted = cache_.Evict(key) > 0;
    ReleaseCachedMemory(dev_);
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory on ", dev_.name, " while ", doing_, ": ", figures, ". LibTorch: ",
        FirstLine(torch_message), evicted ? ". Model evicted" : "",
        "; try a smaller batch, context or model, or bf16"));
  }

  absl::Status Failed(const std::string& message) {
    try {
      Cleanup();
    } catch (const std::exception&) {
      // The device may be unusable (a CUDA fault); the error below says why.
    }
    return absl::InternalError(absl::StrCat("error while ", doing_, ": ", message));
  }

  const v1::BenchmarkSpec& spec_;
  ModelCache& cache_;
  const WorkerDevice& dev_;
  const BenchmarkHooks& hooks_;
  std::string doing_;
  std::shared_ptr<ResidentModel> model_;
  std::unique_ptr<PhaseClock> clock_;
  torch::Tensor inputs_, targets_;
};

}  // namespace

absl::StatusOr<v1::BenchmarkResult> RunBenchmark(const v1::BenchmarkSpec& spec, ModelCache& cache,
                                                 const BenchmarkHooks& hooks) {
  return BenchmarkRun(spec, cache, hooks).Run();
}

}  // namespace benchd::worker
