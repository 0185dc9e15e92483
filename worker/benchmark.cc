#include "worker/benchmark.h"

#include <ATen/Context.h>
#include <ATen/record_function.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/model_config.h"
#include "common/options.h"
#include "common/stats.h"
#include "common/warmup.h"
#include "worker/attention_backend.h"
#include "worker/autocast_guard.h"
#include "worker/cuda_graph_step.h"
#include "worker/ddp/grad_ready_hooks.h"
#include "worker/device_info.h"
#include "worker/explicit_step.h"
#include "worker/job_options.h"
#include "worker/named_range.h"
#include "worker/out_of_memory.h"
#include "worker/parity_export.h"
#include "worker/phase_clock.h"

#if BENCHD_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace benchd::worker {
namespace {

using Clock = std::chrono::steady_clock;

// With BENCHD_BLAS_BACKEND=lt in the worker's environment (an experiment's
// knob, for optimizer_overlap's SM carveout, which PyTorch passes to
// cuBLASLt's matmuls): cuBLASLt for the job's matmuls, the previous backend
// after.
class BlasBackendKnob {
 public:
  BlasBackendKnob() {
    const char* b = std::getenv("BENCHD_BLAS_BACKEND");
    if (b == nullptr || std::string_view(b) != "lt") return;
    previous_ = at::globalContext().blasPreferredBackend();
    at::globalContext().setBlasPreferredBackend(at::BlasBackend::Cublaslt);
    set_ = true;
  }
  ~BlasBackendKnob() {
    if (set_) at::globalContext().setBlasPreferredBackend(previous_);
  }
  BlasBackendKnob(const BlasBackendKnob&) = delete;
  BlasBackendKnob& operator=(const BlasBackendKnob&) = delete;

 private:
  bool set_ = false;
  at::BlasBackend previous_ = at::BlasBackend::Default;
};

// For an overlapped backward (optimizer_overlap), with
// BENCHD_OVERLAP_SM_CARVEOUT=N in the worker's environment (an experiment's
// knob, not an option): cuBLAS's matmuls aim at N SMs fewer than the device
// has (at::Context's SM carveout, as PyTorch's async tensor parallelism
// leaves SMs to its communication kernels), so the AdamW updates on the side
// stream find SMs that no GEMM holds. The previous carveout comes back after.
class OverlapSmCarveout {
 public:
  explicit OverlapSmCarveout(bool active) {
    const char* n = active ? std::getenv("BENCHD_OVERLAP_SM_CARVEOUT") : nullptr;
    const int sms = n != nullptr ? std::atoi(n) : 0;
    if (sms <= 0) return;
    previous_ = at::globalContext()._SMCarveout_EXPERIMENTAL();
    at::globalContext()._setSMCarveout_EXPERIMENTAL(sms);
    set_ = true;
  }
  ~OverlapSmCarveout() {
    if (set_) at::globalContext()._setSMCarveout_EXPERIMENTAL(previous_);
  }
  OverlapSmCarveout(const OverlapSmCarveout&) = delete;
  OverlapSmCarveout& operator=(const OverlapSmCarveout&) = delete;

 private:
  bool set_ = false;
  std::optional<int32_t> previous_;
};

// Peak memory over the measured steps: the caching allocator's on CUDA (reset
// before them), the process's high-water mark on a CPU.
int64_t PeakMemory(const WorkerDevice& dev) {
  return dev.is_cuda() ? PeakAllocatedBytes(dev) : HostMaxRssBytes();
}

const char* PeakMemorySource(const WorkerDevice& dev) {
  return dev.is_cuda() ? "cuda_caching_allocator" : "host_max_rss";
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
    } catch (const AttentionBackendUnavailable& e) {
      return Refused(absl::InvalidArgumentError(absl::StrCat("benchmark.attention: ", e.what())));
    } catch (const c10::Error& e) {
      if (IsHostOutOfMemory(e)) return OutOfMemory(e.what_without_backtrace());
      return Failed(e.what_without_backtrace());
    } catch (const std::exception& e) {
      return Failed(e.what());
    }
  }

 private:
  absl::StatusOr<v1::BenchmarkResult> RunOrThrow() {
    if (absl::Status s = CheckOptionsForDevice(spec_, dev_); !s.ok()) return s;
    const v1::ModelConfig& config = spec_.model();
    const std::string key = ModelCache::Key(dev_.name, config, spec_.precision());
    doing_ = absl::StrCat("building model ", key, " (", ParameterCount(config), " parameters, ",
                          GiB(4 * ParameterCount(config)), " of fp32 weights)");
    bool was_resident = false;
    if (spec_.export_parity()) {
      if (hooks_.parity_bundle_path.empty()) {
        return absl::InvalidArgumentError(
            "benchmark.export_parity: no place to write the parity bundle (no artifacts dir)");
      }
      // Parity starts from the seed's weights and an empty AdamW state.
      cache_.Evict(key);
    }
    model_ = cache_.Acquire(config, spec_.precision(), spec_.seed(), &was_resident);

    // With warm-up auto, `warmup` is the cap until the rule ends the warm-up
    // (and `total` an upper bound until then).
    int64_t warmup = spec_.warmup_auto() ? spec_.warmup_max_steps() : spec_.warmup_steps();
    int64_t total = warmup + spec_.measure_steps();
    if (spec_.warmup_auto()) {
      // Under cuda_graph the rule judges the replays only, not the eager steps before the capture.
      auto_warmup_.emplace(warmup - (spec_.cuda_graph() ? kGraphEagerSteps : 0));
    }
    doing_ = absl::StrCat("making a batch of ", spec_.batch_size(), " x ", spec_.context_length(),
                          " tokens");
    MakeBatch();
    if (spec_.export_parity()) {
      parity_ = std::make_unique<ParityBundle>(spec_, dev_.name, *model_->model, inputs_, targets_);
    }
    // Options (attention, SDPA backend, TF32; a side stream for cuda_graph)
    // hold until the job ends, whichever way it ends.
    const JobOptionsScope options(spec_, model_->model, *model_->optimizer);
    const CaptureStreamScope stream(dev_, spec_.cuda_graph());
    const BlasBackendKnob blas;
    clock_ = MakePhaseClock(dev_, 4);
    // The faithful model's step without the autograd engine, unless asked for
    // autograd or an option changed the model's ops (the graph captures
    // autograd's step).
    if (!spec_.autograd() && !spec_.cuda_graph() &&
        ExplicitStep::Unsupported(*model_->model).empty()) {
      explicit_ = std::make_unique<ExplicitStep>(*model_->model);
      ran_explicit_ = true;
    }
    // optimizer_overlap through autograd: a hook on each gradient's
    // accumulator hands it to the optimizer (the explicit backward says it
    // layer by layer instead). Removed before the options' scope drops the
    // weight copies.
    std::unique_ptr<ddp::GradReadyHooks> overlap_hooks;
    if (Overlap() && !explicit_) {
      AdamW* optimizer = model_->optimizer.get();
      overlap_hooks = std::make_unique<ddp::GradReadyHooks>(
          optimizer->GradientLeaves(),
          [optimizer](const torch::Tensor& leaf) { optimizer->OverlappedUpdate(leaf); });
    }

    v1::BenchmarkResult result;
    for (int64_t i = 0; i < total; ++i) {
      if (hooks_.cancelled && hooks_.cancelled()) {
        Cleanup();
        return absl::CancelledError(absl::StrCat("cancelled before step ", i, " of ", total));
      }
      doing_ =
          absl::StrCat("running step ", i, " of ", total, i < warmup ? " (warm-up)" : "", ": ",
                       ModeName(spec_.mode()), " ", PrecisionName(spec_.precision()), ", batch ",
                       spec_.batch_size(), " x context ", spec_.context_length(), " on ", key);
      if (i == warmup) {
        // Not under a graph: its replays write the gradients into the buffers
        // the capture attached to the parameters, which must stay attached.
        if (!graph_) model_->model->zero_grad(/*set_to_none=*/true);
        ResetPeakAllocated(dev_);
        if (hooks_.on_measure_start) hooks_.on_measure_start();
      }
      if (spec_.cuda_graph() && i == kGraphEagerSteps) {
        doing_ = absl::StrCat("capturing the step as a CUDA graph on ", key);
        CaptureGraph();
        doing_ = absl::StrCat("replaying the CUDA graph of the step, step ", i, " on ", key);
      }
      v1::StepTiming* t = result.add_steps();
      *t = graph_ ? Replay(i, i < warmup) : Step(i, i < warmup);
      if (parity_) {  // after the first step, out of its timing
        doing_ = absl::StrCat("writing the parity bundle ", hooks_.parity_bundle_path);
        parity_->Write(hooks_.parity_bundle_path);
        parity_.reset();
        result.set_parity_bundle(hooks_.parity_bundle_path);
      }
      if (t->warmup() && auto_warmup_ && !(spec_.cuda_graph() && i < kGraphEagerSteps) &&
          auto_warmup_->Add(t->step_seconds())) {
        warmup = i + 1;
        total = warmup + spec_.measure_steps();
      }
      if (hooks_.on_step) hooks_.on_step(*t, total);
    }
    const int64_t peak = PeakMemory(dev_);
    if (hooks_.on_measure_end) hooks_.on_measure_end();
    Cleanup();

    Summarize(result);
    EchoSpec(result, warmup);
    result.set_peak_memory_bytes(peak);
    result.set_peak_memory_source(PeakMemorySource(dev_));
    result.set_parameter_count(model_->parameter_count);
    result.set_model_was_resident(was_resident);
    result.set_model_build_seconds(was_resident ? 0.0 : model_->build_seconds);
    result.set_timer(clock_->name());
    if (hooks_.peaks) {
      // After the steps, so a first-use probe cannot disturb their timing.
      doing_ = absl::StrCat("measuring the peak matmul rate and bandwidth of ", dev_.name);
      FillRoofline(spec_, *hooks_.peaks, &result);
    }
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

  // One synchronized step. The step and each phase are named ranges (NVTX for
  // nsys, user scopes for the profile request), the step's ending with the
  // synchronize, so that its device time is all in it.
  v1::StepTiming Step(int64_t index, bool warmup) {
    const v1::BenchmarkMode mode = spec_.mode();
    TransformerLM& model = model_->model;
    auto step_range = std::make_unique<NamedRange>("step");
    model->zero_grad(/*set_to_none=*/true);
    clock_->Reset();
    const auto host_start = Clock::now();
    clock_->Mark();
    torch::Tensor loss;
    {
      NamedRange range("forward");
      AutocastGuard autocast(dev_.device.type(), AutocastDtype(spec_.precision()));
      torch::Tensor logits;
      if (explicit_) {
        loss = explicit_->Forward(inputs_, targets_,
                                  /*keep_for_backward=*/mode != v1::BENCHMARK_MODE_FORWARD,
                                  parity_ ? &logits : nullptr);
      } else {
        logits = model->forward(inputs_);
        loss = CrossEntropy(logits, targets_);
      }
      if (parity_) parity_->SetLogits(logits);
    }
    clock_->Mark();
    int marks = 2;
    double backward = 0, optimizer = 0;
    if (mode == v1::BENCHMARK_MODE_FORWARD_BACKWARD || mode == v1::BENCHMARK_MODE_TRAIN_STEP) {
      {
        NamedRange range("backward");
        const OverlapSmCarveout carveout(Overlap());
        if (Overlap()) model_->optimizer->BeginOverlappedStep();
        if (explicit_) {
          ExplicitStep::GradsReady ready;
          if (Overlap()) {
            ready = [optimizer = model_->optimizer.get()](const std::vector<torch::Tensor>& ps) {
              for (const torch::Tensor& p : ps) optimizer->OverlappedUpdate(p);
            };
          }
          explicit_->Backward(ready);
        } else {
          loss.backward();
        }
      }
      clock_->Mark();
      ++marks;
    }
    if (mode == v1::BENCHMARK_MODE_TRAIN_STEP) {
      {
        NamedRange range("optimizer_step");
        if (Overlap()) {
          model_->optimizer->EndOverlappedStep();  // the wait for the updates still running
        } else {
          RunOptimizerStep(*model_->optimizer, spec_);
        }
      }
      clock_->Mark();
      ++marks;
    }
    Synchronize(dev_);
    const double host = std::chrono::duration<double>(Clock::now() - host_start).count();
    step_range.reset();

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

  // The whole step as one CUDA graph, captured after the eager warm-up steps
  // (which left every tensor the step keeps allocated: see kGraphEagerSteps).
  // Gradients are dropped first so that the captured backward allocates them
  // from the graph's pool: every replay then writes them afresh, as an eager
  // step after zero_grad(set_to_none) does. No phase marks, NVTX ranges or
  // .item() inside: the graph holds kernels only.
  void CaptureGraph() {
    model_->model->zero_grad(/*set_to_none=*/true);
    // The graph allocates from a private pool, which cannot reuse the blocks the
    // eager steps left cached; hand those back first, or a model that fits
    // eagerly runs out of memory at the capture.
    ReleaseCachedMemory(dev_);
    const v1::BenchmarkMode mode = spec_.mode();
    graph_ = std::make_unique<CudaGraphStep>(dev_, [&] {
      torch::Tensor loss;
      {
        AutocastGuard autocast(dev_.device.type(), AutocastDtype(spec_.precision()));
        loss = CrossEntropy(model_->model->forward(inputs_), targets_);
      }
      if (mode != v1::BENCHMARK_MODE_FORWARD) {
        const OverlapSmCarveout carveout(Overlap());
        if (Overlap()) model_->optimizer->BeginOverlappedStep();
        loss.backward();
        if (Overlap()) model_->optimizer->EndOverlappedStep();  // joins the side stream
      }
      if (OptimizerInGraph() && !Overlap()) RunOptimizerStep(*model_->optimizer, spec_);
      return loss;
    });
  }

  // Under cuda_graph, foreach's capturable step is part of the graph, and so
  // is the overlapped fused step (its kernels read t on the device); the
  // faithful loop and the fused kernel after the backward take host numbers
  // that change every step (bias correction, eps), so they run eagerly
  // after each replay.
  bool OptimizerInGraph() const {
    return spec_.mode() == v1::BENCHMARK_MODE_TRAIN_STEP &&
           (spec_.optimizer_impl() == v1::OPTIMIZER_IMPL_FOREACH || Overlap());
  }
  // optimizer_overlap: the fused update of each parameter beside the backward.
  bool Overlap() const {
    return spec_.mode() == v1::BENCHMARK_MODE_TRAIN_STEP && spec_.optimizer_overlap();
  }
  bool OptimizerAfterReplay() const {
    return spec_.mode() == v1::BENCHMARK_MODE_TRAIN_STEP && !OptimizerInGraph();
  }

  // One replay of the captured step, timed by CUDA events around it on the
  // capture stream; the phases cannot be told apart inside a graph.
  v1::StepTiming Replay(int64_t index, bool warmup) {
    clock_->Reset();
    const auto host_start = Clock::now();
    clock_->Mark();
    {
      NamedRange range("graph_replay");
      graph_->Replay();
    }
    clock_->Mark();
    if (OptimizerAfterReplay()) {
      // The replay rewrote the gradients the capture attached to the parameters.
      NamedRange range("optimizer_step");
      RunOptimizerStep(*model_->optimizer, spec_);
      clock_->Mark();
    }
    Synchronize(dev_);
    const double host = std::chrono::duration<double>(Clock::now() - host_start).count();
    v1::StepTiming t;
    t.set_index(index);
    t.set_warmup(warmup);
    const int last = OptimizerAfterReplay() ? 2 : 1;
    t.set_step_seconds(clock_->Seconds(0, last));
    if (last == 2) t.set_optimizer_seconds(clock_->Seconds(1, 2));
    t.set_host_seconds(host);
    t.set_loss(graph_->output().item<double>());
    return t;
  }

  // The spec as it ran (which engine, too), and the warm-up as it ran.
  void EchoSpec(v1::BenchmarkResult& r, int64_t warmup_ran) const {
    *r.mutable_spec() = spec_;
    r.mutable_spec()->set_autograd(!ran_explicit_);
    r.set_warmup_steps_run(warmup_ran);
    if (auto_warmup_) r.set_warmup_converged(auto_warmup_->converged());
    if (spec_.cuda_graph()) r.set_graph_eager_steps(kGraphEagerSteps);
  }

  void Summarize(v1::BenchmarkResult& r) const {
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
    // Phases the mode does not run stay unset rather than read as "0 s"; so
    // do forward and backward under cuda_graph, whose replays are not split
    // into phases (an optimizer run after the replay is timed).
    if (!spec_.cuda_graph()) {
      *r.mutable_forward() = ComputeStats(fwd);
      if (spec_.mode() != v1::BENCHMARK_MODE_FORWARD) *r.mutable_backward() = ComputeStats(bwd);
      if (spec_.mode() == v1::BENCHMARK_MODE_TRAIN_STEP) *r.mutable_optimizer() = ComputeStats(opt);
    } else if (OptimizerAfterReplay()) {
      *r.mutable_optimizer() = ComputeStats(opt);  // eager after each replay, so timed
    }
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
    if (graph_) {
      // Replays advanced AdamW's device step counts; the host learns them here.
      Synchronize(dev_);
      if (model_ && spec_.mode() == v1::BENCHMARK_MODE_TRAIN_STEP)
        model_->optimizer->SyncHostSteps();
      graph_.reset();
    }
    inputs_ = targets_ = torch::Tensor();
    parity_.reset();
    explicit_.reset();
    if (model_) {
      model_->model->zero_grad(/*set_to_none=*/true);
      cache_.UpdateBytes(*model_);
    }
  }

  absl::Status OutOfMemory(const std::string& torch_message) {
    if (hooks_.on_out_of_memory) {
      try {
        hooks_.on_out_of_memory();
      } catch (const std::exception&) {
        // What it wanted to keep is lost; the failure below still says what happened.
      }
    }
    const std::string figures = MemoryFigures(dev_);
    const std::string key = ModelCache::Key(dev_.name, spec_.model(), spec_.precision());
    inputs_ = targets_ = torch::Tensor();
    parity_.reset();
    graph_.reset();
    explicit_.reset();
    if (model_) model_->model->zero_grad(/*set_to_none=*/true);
    model_.reset();
    const bool evicted = cache_.Evict(key) > 0;
    ReleaseCachedMemory(dev_);
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory on ", dev_.name, " while ", doing_, ": ", figures,
                     ". LibTorch: ", FirstLine(torch_message), evicted ? ". Model evicted" : "",
                     "; try a smaller batch, context or model, or bf16"));
  }

  // Cleans up like Failed, but returns `status` as it is.
  absl::Status Refused(const absl::Status& status) {
    try {
      Cleanup();
    } catch (const std::exception&) {
    }
    return status;
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
  std::unique_ptr<ParityBundle> parity_;    // export_parity, until the first step is written
  std::optional<AutoWarmup> auto_warmup_;   // warmup_auto
  std::unique_ptr<CudaGraphStep> graph_;    // cuda_graph, from the capture on
  std::unique_ptr<ExplicitStep> explicit_;  // the faithful model without autograd; null: autograd
  bool ran_explicit_ = false;               // explicit_ is gone by the time the result is echoed
};

}  // namespace

absl::StatusOr<v1::BenchmarkResult> RunBenchmark(const v1::BenchmarkSpec& spec, ModelCache& cache,
                                                 const BenchmarkHooks& hooks) {
  return BenchmarkRun(spec, cache, hooks).Run();
}

}  // namespace benchd::worker
