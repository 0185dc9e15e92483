#include "worker/attention_run.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/attention_math.h"
#include "common/model_config.h"
#include "common/options.h"
#include "common/stats.h"
#include "worker/attention_backend.h"
#include "worker/device_info.h"
#include "worker/flash/fused_attention.h"
#include "worker/flash/tiled_attention.h"
#include "worker/out_of_memory.h"
#include "worker/phase_clock.h"
#include "worker/transformer.h"

#if BENCHD_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace benchd::worker {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kCudaAllocator[] = "cuda_caching_allocator";
constexpr char kNoAllocator[] = "unavailable on cpu";

at::ScalarType DtypeOf(v1::Precision p) {
  switch (p) {
    case v1::PRECISION_BF16:
      return at::kBFloat16;
    case v1::PRECISION_FP16:
      return at::kHalf;
    default:
      return at::kFloat;
  }
}

// AttentionSpec.memory_cap_bytes: the caching allocator's memory fraction,
// set so that it may reserve `cap` bytes beyond what it holds when the run
// starts (cached free blocks released first, so they do not count), and
// restored when the run ends. A request beyond it fails inside the allocator
// with c10::OutOfMemoryError, exactly as a full device does.
class MemoryCap {
 public:
  MemoryCap(const WorkerDevice& dev, int64_t cap) : dev_(dev) {
#if BENCHD_WITH_CUDA
    const c10::DeviceIndex index = dev.device.index();
    // The caching allocator is set up lazily, by the process's first CUDA
    // tensor: before it, asking it for a device's stats or fraction fails
    // ("Invalid device argument"), as a capped first job on a fresh worker
    // did on an H100.
    at::globalContext().lazyInitDevice(at::kCUDA);
    ReleaseCachedMemory(dev);
    c10::cuda::CUDAGuard guard(index);
    size_t free = 0, total = 0;
    C10_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    const int64_t reserved =
        stats.reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
            .current;
    previous_ = c10::cuda::CUDACachingAllocator::getMemoryFraction(index);
    const double fraction =
        std::min(1.0, static_cast<double>(reserved + cap) / static_cast<double>(total));
    c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, index);
    active_ = true;
#else
    (void)cap;
#endif
  }
  ~MemoryCap() {
#if BENCHD_WITH_CUDA
    if (active_) c10::cuda::CUDACachingAllocator::setMemoryFraction(previous_, dev_.device.index());
#endif
  }
  MemoryCap(const MemoryCap&) = delete;
  MemoryCap& operator=(const MemoryCap&) = delete;

 private:
  const WorkerDevice& dev_;
  bool active_ = false;
  double previous_ = 1.0;
};

// One run; its tensors are members so the error paths can free them.
class AttentionRun {
 public:
  AttentionRun(const v1::AttentionSpec& spec, const WorkerDevice& dev, const AttentionHooks& hooks)
      : spec_(spec), dev_(dev), hooks_(hooks) {}

  absl::StatusOr<v1::AttentionResult> Run() {
    try {
      return RunOrThrow();
    } catch (const c10::OutOfMemoryError& e) {
      return OutOfMemory(e.what_without_backtrace());
    } catch (const std::bad_alloc& e) {
      return OutOfMemory(e.what());
    } catch (const AttentionBackendUnavailable& e) {
      Free();
      return absl::InvalidArgumentError(absl::StrCat("attention.implementation: ", e.what()));
    } catch (const c10::Error& e) {
      if (IsHostOutOfMemory(e)) return OutOfMemory(e.what_without_backtrace());
      Free();
      return absl::InternalError(
          absl::StrCat("attention failed while ", doing_, ": ", e.what_without_backtrace()));
    }
  }

 private:
  absl::StatusOr<v1::AttentionResult> RunOrThrow() {
    std::unique_ptr<MemoryCap> cap;
    if (spec_.has_memory_cap_bytes() && dev_.is_cuda()) {
      cap = std::make_unique<MemoryCap>(dev_, spec_.memory_cap_bytes());
    }
    doing_ = absl::StrCat("making Q, K, V of ", Shape(), " in ", PrecisionName(spec_.precision()));
    MakeInputs();
    const int64_t warmup = spec_.warmup_passes();
    const int64_t total = warmup + spec_.passes();
    auto clock = MakePhaseClock(dev_, 3);
    // do_bench's cache flush: 256 MiB zeroed before each pass (H100's L2 is 50 MB).
    torch::Tensor l2_flush;
    if (spec_.flush_l2() && dev_.is_cuda()) {
      l2_flush = torch::empty({int64_t{256} << 20},
                              torch::TensorOptions().dtype(torch::kUInt8).device(dev_.device));
    }
    v1::AttentionResult result;
    std::vector<double> forward, backward, step;
    int64_t saved = 0, peak = 0;
    for (int64_t i = 0; i < total; ++i) {
      if (hooks_.cancelled && hooks_.cancelled()) {
        Free();
        return absl::CancelledError(absl::StrCat("cancelled before pass ", i, " of ", total));
      }
      doing_ = absl::StrCat("running pass ", i, " of ", total, i < warmup ? " (warm-up)" : "", ": ",
                            Describe());
      for (torch::Tensor* t : {&q_, &k_, &v_}) t->mutable_grad() = torch::Tensor();
      Synchronize(dev_);
      const int64_t before = AllocatedBytes(dev_);
      ResetPeakAllocated(dev_);
      if (l2_flush.defined()) l2_flush.zero_();  // before the first mark: not timed
      const Clock::time_point host_start = Clock::now();
      clock->Reset();
      clock->Mark();
      torch::Tensor out = Attend();
      clock->Mark();
      // Host-side bookkeeping, exact without a synchronize: what the forward
      // left for the backward (saved tensors and the output).
      const int64_t after_forward = AllocatedBytes(dev_);
      out.backward(grad_out_);
      clock->Mark();
      Synchronize(dev_);
      const double host_seconds = std::chrono::duration<double>(Clock::now() - host_start).count();
      v1::StepTiming* t = result.add_passes();
      t->set_index(i);
      t->set_warmup(i < warmup);
      t->set_forward_seconds(clock->Seconds(0, 1));
      t->set_backward_seconds(clock->Seconds(1, 2));
      t->set_step_seconds(clock->Seconds(0, 2));
      t->set_host_seconds(host_seconds);
      if (i >= warmup) {
        forward.push_back(t->forward_seconds());
        backward.push_back(t->backward_seconds());
        step.push_back(t->step_seconds());
        saved = std::max(saved, after_forward - before);
        peak = std::max(peak, PeakAllocatedBytes(dev_) - before);
      }
      if (hooks_.on_step) hooks_.on_step(*t, total);
    }
    result.set_timer(clock->name());
    Free();

    *result.mutable_spec() = spec_;
    result.set_device(dev_.name);
    result.set_device_name(dev_.description);
    *result.mutable_forward() = ComputeStats(forward);
    *result.mutable_backward() = ComputeStats(backward);
    *result.mutable_step() = ComputeStats(step);
    result.set_forward_flops(AttentionForwardFlops(spec_));
    result.set_backward_flops(AttentionBackwardFlops(spec_));
    if (result.forward().median() > 0)
      result.set_forward_tflops_per_second(result.forward_flops() / result.forward().median() /
                                           1e12);
    if (result.backward().median() > 0)
      result.set_backward_tflops_per_second(result.backward_flops() / result.backward().median() /
                                            1e12);
    result.set_flash_forward_flops(FlashForwardFlops(spec_));
    result.set_flash_backward_flops(FlashBackwardFlops(spec_));
    auto tflops = [](double flops, const v1::Stats& s) {
      return s.median() > 0 ? flops / s.median() / 1e12 : 0.0;
    };
    result.set_flash_forward_tflops_per_second(
        tflops(result.flash_forward_flops(), result.forward()));
    result.set_flash_backward_tflops_per_second(
        tflops(result.flash_backward_flops(), result.backward()));
    result.set_flash_step_tflops_per_second(
        tflops(result.flash_forward_flops() + result.flash_backward_flops(), result.step()));
    result.set_memory_source(dev_.is_cuda() ? kCudaAllocator : kNoAllocator);
    result.set_saved_activation_bytes(saved);
    result.set_peak_pass_bytes(peak);
    result.set_score_matrix_bytes(ScoreMatrixBytes(spec_));
    const SavedByFormula formula = AttentionSavedByFormula(spec_);
    result.set_saved_score_matrices(formula.score_matrices);
    result.set_saved_by_formula_bytes(formula.bytes);
    *result.mutable_versions() = WorkerVersions();
    return result;
  }

  // (B, T, d), or (B, H, T, d) with heads.
  std::vector<int64_t> Dims() const {
    if (spec_.has_num_heads())
      return {spec_.batch_size(), spec_.num_heads(), spec_.seq_len(), spec_.head_dim()};
    return {spec_.batch_size(), spec_.seq_len(), spec_.head_dim()};
  }
  std::string Shape() const {
    std::vector<int64_t> d = Dims();
    std::string s = "(";
    for (size_t i = 0; i < d.size(); ++i) absl::StrAppend(&s, i ? ", " : "", d[i]);
    return s + ")";
  }
  std::string Describe() const {
    return absl::StrCat(AttentionName(spec_.implementation()), spec_.causal() ? " causal" : "",
                        " attention on ", Shape(), " ", PrecisionName(spec_.precision()), " on ",
                        dev_.name);
  }

  // Drawn on the CPU from the seed and copied over, so a seed names the same
  // inputs on every device.
  void MakeInputs() {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(spec_.seed());
    const auto on = torch::TensorOptions().device(dev_.device).dtype(DtypeOf(spec_.precision()));
    auto draw = [&] { return torch::randn(Dims(), gen, torch::kFloat).to(on); };
    q_ = draw().requires_grad_(true);
    k_ = draw().requires_grad_(true);
    v_ = draw().requires_grad_(true);
    grad_out_ = draw();
    if (spec_.causal() && IsFaithful(spec_.implementation())) {
      mask_ = CausalMask(spec_.seq_len(), dev_.device);  // made once, as a module's buffer
    }
  }

  torch::Tensor Attend() { return AttentionForward(spec_, q_, k_, v_, mask_, &masks_); }

  void Free() {
    q_ = k_ = v_ = grad_out_ = mask_ = torch::Tensor();
    masks_ = CausalMaskCache();
  }

  absl::Status OutOfMemory(const std::string& torch_message) {
    const std::string figures = MemoryFigures(dev_);
    Free();
    ReleaseCachedMemory(dev_);
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory on ", dev_.name, " while ", doing_, ": ", figures,
        spec_.has_memory_cap_bytes() ? absl::StrCat(" (memory cap ", GiB(spec_.memory_cap_bytes()),
                                                    " above what was reserved at the start)")
                                     : "",
        "; by formula one score matrix is ", GiB(ScoreMatrixBytes(spec_)),
        ". LibTorch: ", FirstLine(torch_message)));
  }

  const v1::AttentionSpec& spec_;
  const WorkerDevice& dev_;
  const AttentionHooks& hooks_;
  std::string doing_ = "starting";
  torch::Tensor q_, k_, v_, grad_out_, mask_;
  CausalMaskCache masks_;
};

}  // namespace

torch::Tensor AttentionForward(const v1::AttentionSpec& spec, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& mask, CausalMaskCache* masks) {
  if (IsFaithful(spec.implementation())) return ScaledDotProductAttention(q, k, v, mask, masks);
  if (spec.implementation() == v1::ATTENTION_IMPL_TILED) {
    return TiledAttention(q, k, v, TiledAttentionOptions{.causal = spec.causal()});
  }
  // SDPA's fused kernels and benchd's take (B, H, T, d).
  const bool heads = spec.has_num_heads();
  if (spec.implementation() == v1::ATTENTION_IMPL_FUSED) {
    torch::Tensor out = FusedAttention(heads ? q : q.unsqueeze(1), heads ? k : k.unsqueeze(1),
                                       heads ? v : v.unsqueeze(1), spec.causal());
    return heads ? out : out.squeeze(1);
  }
  SdpBackendGuard guard(spec.implementation());
  torch::Tensor out =
      SdpaCausalAttention(heads ? q : q.unsqueeze(1), heads ? k : k.unsqueeze(1),
                          heads ? v : v.unsqueeze(1), spec.implementation(), spec.causal());
  return heads ? out : out.squeeze(1);
}

absl::StatusOr<v1::AttentionResult> RunAttention(const v1::AttentionSpec& spec,
                                                 const WorkerDevice& dev,
                                                 const AttentionHooks& hooks) {
  return AttentionRun(spec, dev, hooks).Run();
}

}  // namespace benchd::worker
