// The course's AdamW update through torch's multi-tensor kernels
// (OptimizerImpl foreach and fused; docs/architecture.md "Options"). The
// faithful loop is AdamW::Step in adamw.cc.
//
// Why the fused path does not call at::_fused_adamw_ as torch.optim.AdamW
// does. Per coordinate, after m and v are updated, with ε, λ = weight_decay,
// α_t = lr·√(1−β2^t)/(1−β1^t) and u = m/(√v + ε):
//
//   course:  p' = p − α_t·u;   p'' = p' − lr·λ·p'  = (1 − lr·λ)·(p − α_t·u)
//   torch:   p' = (1 − lr·λ)·p;  p'' = p' − (lr/(1−β1^t))·m/(√v/√(1−β2^t) + ε)
//                                    = (1 − lr·λ)·p − α_t·m/(√v + ε·√(1−β2^t))
//
// They differ twice:
//  1. The decay order: course − torch = lr·λ·α_t·u, i.e. the course also
//     decays the Adam step. |α_t·u| is at most about lr, so this is at most
//     about lr²·λ = 1e-8 per step at lr 1e-3, λ 0.01 (2e-7 of a weight of 0.05).
//  2. Where ε goes: torch adds ε to the bias-corrected √v̂, which is the
//     course's form with ε·√(1−β2^t) in place of ε: 0.0316·ε at t = 1. Where
//     √v is near ε the steps differ a lot: a first gradient of 1e-6 gives
//     √v = √(1−β2)·1e-6 = 3.16e-8, u = 1e-7/(3.16e-8 + 1e-8) = 2.40 for the
//     course and 1e-7/(3.16e-8 + 3.2e-10) = 3.13 for torch, 30% more; at 1e-4
//     still 0.3% (3e-6 on a step of 1e-3). AdamWImplsTest shows it on real
//     numbers.
// So `_fused_adamw_(..., lr, weight_decay=λ, eps=ε)` is not the same update.
// Both differences go away with other arguments to the same kernel, per group
// of parameters at the same t: lr' = lr·(1 − lr·λ), λ' = λ/(1 − lr·λ) and
// ε' = ε/√(1−β2^t) give
//
//   p'' = (1 − lr'·λ')·p − (lr'/(1−β1^t))·m/(√v/√(1−β2^t) + ε/√(1−β2^t))
//       = (1 − lr·λ)·p − (1 − lr·λ)·α_t·m/(√v + ε)  = (1 − lr·λ)·(p − α_t·u),
//
// the course's update exactly in real arithmetic, in one kernel that reads
// and writes p, m and v once (an earlier version ran _fused_adam_ and then a
// _foreach_ decay: one more pass over the weights). What is left is float32
// rounding: a few ulps of the step.
//
// ε' is a host number that changes with t, which is why a CUDA graph (which
// replays the scalars it captured) cannot use the fused path for the course's
// update; the capturable foreach path computes α_t on the device instead.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "worker/adamw.h"

#if BENCHD_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "worker/adamw_copy_kernel.h"
#endif

namespace benchd::worker {
namespace {

// Whether `device`'s current stream is capturing a CUDA graph. Never asks
// CUDA for a CPU tensor: a CPU worker may run where CUDA cannot initialise.
bool IsCapturing(const torch::Device& device) {
#if BENCHD_WITH_CUDA
  return device.is_cuda() &&
         c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
#else
  (void)device;
  return false;
#endif
}

}  // namespace

torch::Tensor AdamW::Grad(size_t i) const {
  if (!copies_.empty() && copies_[i].defined()) return copies_[i].grad();
  return params_[i].grad();
}

void AdamW::CheckNoWeightCopies(const char* path) const {
  TORCH_CHECK(copies_.empty(), "AdamW: ", path,
              " cannot update weights from their bf16/fp16 copies; weight copies need the "
              "fused step");
}

void AdamW::SetWeightCopies(const std::vector<std::pair<torch::Tensor, torch::Tensor>>& pairs) {
  copies_.clear();
  if (pairs.empty()) return;
  copies_.resize(params_.size());
  for (const auto& [param, copy] : pairs) {
    size_t i = 0;
    while (i < params_.size() && !params_[i].is_same(param)) ++i;
    TORCH_CHECK(i < params_.size(),
                "AdamW: a weight copy's parameter is not one of this optimizer's");
    TORCH_CHECK(param.scalar_type() == at::kFloat && param.is_contiguous() &&
                    copy.is_contiguous() && copy.sizes() == param.sizes() &&
                    (copy.scalar_type() == at::kBFloat16 || copy.scalar_type() == at::kHalf),
                "AdamW: weight copies are contiguous bf16/fp16 tensors of a contiguous fp32 "
                "parameter's shape; got ",
                copy.scalar_type(), " ", copy.sizes(), " for ", param.scalar_type(), " ",
                param.sizes());
    copies_[i] = copy;
  }
}

std::vector<size_t> AdamW::WithGradients() {
  std::vector<size_t> idx;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!Grad(i).defined()) continue;
    State& s = state_[i];
    if (!s.m.defined()) {
      s.m = torch::zeros_like(params_[i]);
      s.v = torch::zeros_like(params_[i]);
    }
    idx.push_back(i);
  }
  return idx;
}

void AdamW::RefreshDeviceSteps(const std::vector<size_t>& idx) {
  for (size_t i : idx) {
    State& s = state_[i];
    if (!s.step.defined()) {
      s.step = torch::zeros(
          {}, torch::TensorOptions().dtype(torch::kFloat32).device(params_[i].device()));
      s.device_t = 0;
    }
    if (s.device_t != s.t) {
      s.step.fill_(static_cast<double>(s.t));
      s.device_t = s.t;
    }
  }
}

void AdamW::StepForeach() {
  CheckNoWeightCopies("the foreach step");
  torch::NoGradGuard no_grad;
  const AdamWOptions& o = options_;
  const std::vector<size_t> idx = WithGradients();
  if (idx.empty()) return;
  std::vector<torch::Tensor> p, g, m, v;
  std::vector<at::Scalar> neg_alpha;
  for (size_t i : idx) {
    State& s = state_[i];
    s.t += 1;
    p.push_back(params_[i]);
    g.push_back(params_[i].grad());
    m.push_back(s.m);
    v.push_back(s.v);
    neg_alpha.emplace_back(-StepSize(s.t));
  }
  at::_foreach_mul_(m, o.beta1);
  at::_foreach_add_(m, g, 1 - o.beta1);
  at::_foreach_mul_(v, o.beta2);
  at::_foreach_addcmul_(v, g, g, 1 - o.beta2);
  std::vector<torch::Tensor> denom = at::_foreach_sqrt(v);
  at::_foreach_add_(denom, o.eps);
  at::_foreach_addcdiv_(p, m, denom, neg_alpha);
  at::_foreach_add_(p, p, -o.lr * o.weight_decay);
}

bool AdamW::KernelPath(size_t i) const {
  if (copies_.empty()) return false;
  if (copies_[i].defined()) return true;
#if BENCHD_WITH_CUDA
  return params_[i].is_cuda();
#else
  return false;
#endif
}

void AdamW::StepFused() {
  torch::NoGradGuard no_grad;
  std::vector<size_t> idx, kernel;
  for (size_t i : WithGradients()) (KernelPath(i) ? kernel : idx).push_back(i);
  StepWeightCopies(kernel);
  if (idx.empty()) return;
  RefreshDeviceSteps(idx);
  std::vector<torch::Tensor> steps;
  for (size_t i : idx) steps.push_back(state_[i].step);
  // As torch.optim's fused Adam does: the kernel reads the step, the caller advances it.
  at::_foreach_add_(steps, 1.0);
  std::map<int64_t, std::vector<size_t>> by_step;
  for (size_t i : idx) {
    State& s = state_[i];
    s.t += 1;
    s.device_t = s.t;
    by_step[s.t].push_back(i);
  }
  for (const auto& [t, group] : by_step) TorchFusedUpdate(group, t);
}

void AdamW::TorchFusedUpdate(const std::vector<size_t>& group, int64_t t) {
  const AdamWOptions& o = options_;
  TORCH_CHECK(o.lr * o.weight_decay < 1, "AdamW fused: lr * weight_decay must be below 1, got ",
              o.lr * o.weight_decay);
  const double fused_lr = o.lr * (1 - o.lr * o.weight_decay);
  const double fused_weight_decay = o.weight_decay / (1 - o.lr * o.weight_decay);
  std::vector<torch::Tensor> p, g, m, v, st;
  for (size_t i : group) {
    p.push_back(params_[i]);
    g.push_back(params_[i].grad());
    m.push_back(state_[i].m);
    v.push_back(state_[i].v);
    st.push_back(state_[i].step);
  }
  // The course's update, (θ − α_t·m/(√v+ε))·(1 − lr·λ), is torch's AdamW
  // kernel's θ·(1 − lr'·λ') − lr'·√bc2/bc1·m/(√v + ε'·√bc2) with
  // lr' = lr·(1 − lr·λ), λ' = λ/(1 − lr·λ) and ε' = ε/√bc2: one kernel reads
  // and writes each tensor once, decay included.
  const double eps_t = o.eps / std::sqrt(1 - std::pow(o.beta2, static_cast<double>(t)));
  at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, st, fused_lr, o.beta1, o.beta2,
                    fused_weight_decay, eps_t, /*amsgrad=*/false, /*maximize=*/false);
}

void AdamW::StepWeightCopies(const std::vector<size_t>& idx) {
  for (size_t i : idx) {
    state_[i].t += 1;
    KernelUpdate(i, /*device_step=*/false);
  }
}

void AdamW::FusedUpdate(size_t i, bool device_step) {
  if (KernelPath(i)) {
    KernelUpdate(i, device_step);
  } else {
    TorchFusedUpdate({i}, state_[i].t);
  }
}

void AdamW::KernelUpdate(size_t i, bool device_step) {
  State& s = state_[i];
  torch::Tensor& p = params_[i];
  const torch::Tensor copy = copies_.empty() ? torch::Tensor() : copies_[i];
  const torch::Tensor g = Grad(i);
  const at::ScalarType g_dtype = copy.defined() ? copy.scalar_type() : at::kFloat;
  TORCH_CHECK(g.is_contiguous() && g.scalar_type() == g_dtype,
              "AdamW: the fused kernel needs a contiguous gradient of dtype ", g_dtype, ", got ",
              g.scalar_type(), g.is_contiguous() ? "" : " (not contiguous)");
#if BENCHD_WITH_CUDA
  if (p.is_cuda()) {
    TORCH_CHECK(p.scalar_type() == at::kFloat && p.is_contiguous(),
                "AdamW: the fused kernel updates contiguous fp32 parameters");
    const AdamWOptions& o = options_;
    const c10::cuda::CUDAGuard guard(p.device());
    AdamWCopyArgs a;
    a.param = p.data_ptr<float>();
    a.grad = g.data_ptr();
    a.exp_avg = s.m.data_ptr<float>();
    a.exp_avg_sq = s.v.data_ptr<float>();
    a.copy = copy.defined() ? copy.data_ptr() : nullptr;
    a.numel = p.numel();
    a.half = copy.defined() && copy.scalar_type() == at::kHalf;
    a.beta1 = static_cast<float>(o.beta1);
    a.beta2 = static_cast<float>(o.beta2);
    a.one_minus_beta1 = static_cast<float>(1 - o.beta1);
    a.one_minus_beta2 = static_cast<float>(1 - o.beta2);
    a.alpha = static_cast<float>(StepSize(s.t));
    a.eps = static_cast<float>(o.eps);
    a.lr_weight_decay = static_cast<float>(o.lr * o.weight_decay);
    if (device_step) {
      TORCH_CHECK(s.step.defined() && s.device_t == s.t && alpha_table_.defined(),
                  "AdamW: a device-step update without its step tensor or α table");
      // BENCHD_OVERLAP_MAX_BLOCKS=N (an experiment's knob): at most N blocks
      // per overlapped update, so it holds only a few SMs at a time.
      static const int max_blocks = [] {
        const char* n = std::getenv("BENCHD_OVERLAP_MAX_BLOCKS");
        return n != nullptr ? std::atoi(n) : 0;
      }();
      a.max_blocks = max_blocks;
      a.step = s.step.data_ptr<float>();
      a.alpha_table = alpha_table_.data_ptr<float>();
      a.alpha_table_size = alpha_table_.numel();
      a.lr = o.lr;
      a.beta1_d = o.beta1;
      a.beta2_d = o.beta2;
    }
    const char* error =
        LaunchAdamWCopy(a, c10::cuda::getCurrentCUDAStream(p.device().index()).stream());
    TORCH_CHECK(error == nullptr, "AdamW: the fused update kernel failed to launch: ", error);
    return;
  }
#else
  (void)device_step;
#endif
  // Elsewhere (a CPU worker, or a build without CUDA) the faithful loop's
  // update with the gradient in fp32 first: more passes, the same numbers.
  CourseUpdate(i, g.to(at::kFloat));
  if (copy.defined()) copy.detach().copy_(p);
}

void AdamW::EnsureAlphaTable(int64_t t, const torch::Device& device) {
  if (alpha_table_.defined() && alpha_table_.device() == device && alpha_table_.numel() > t) {
    return;
  }
  // Room for many graph replays past t (beyond it the kernel computes α itself).
  constexpr int64_t kAhead = int64_t{1} << 16;
  const int64_t size = t + kAhead;
  torch::Tensor host = torch::zeros({size}, torch::kFloat32);
  float* a = host.data_ptr<float>();
  for (int64_t k = 1; k < size; ++k) a[k] = static_cast<float>(StepSize(k));
  alpha_table_ = host.to(device);
}

struct AdamW::Overlap {
  std::unordered_map<const c10::TensorImpl*, size_t> leaf_index;
  std::vector<char> pending;  // advanced in Begin, not yet updated
  bool active = false;
  bool launched = false;  // something went to the side stream this step
#if BENCHD_WITH_CUDA
  std::optional<c10::cuda::CUDAStream> side;
  at::cuda::CUDAEvent ready, done;
#endif
};

AdamW::~AdamW() = default;

std::vector<torch::Tensor> AdamW::GradientLeaves() const {
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& leaf = !copies_.empty() && copies_[i].defined() ? copies_[i] : params_[i];
    if (leaf.requires_grad()) out.push_back(leaf);
  }
  return out;
}

void AdamW::BeginOverlappedStep() {
  torch::NoGradGuard no_grad;
  if (!overlap_) overlap_ = std::make_unique<Overlap>();
  Overlap& ov = *overlap_;
  // A step that an error cut short left its bookkeeping behind: start afresh.
  ov.active = false;
  ov.launched = false;
  ov.leaf_index.clear();
  ov.pending.assign(params_.size(), 0);
  const bool capturing = !params_.empty() && IsCapturing(params_.front().device());
  std::vector<size_t> idx;
  for (size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& leaf = !copies_.empty() && copies_[i].defined() ? copies_[i] : params_[i];
    if (!leaf.requires_grad()) continue;
    State& s = state_[i];
    if (capturing) {
      // Anything allocated or filled now would be redone at every replay.
      TORCH_CHECK(s.m.defined() && s.step.defined() && s.device_t == s.t,
                  "AdamW: capturing an overlapped step for a parameter with no optimizer state "
                  "on the device yet; run the step eagerly once before capturing");
      TORCH_CHECK(!params_[i].is_cuda() || KernelPath(i),
                  "AdamW: an overlapped step under a CUDA graph needs weight copies (the fp32 "
                  "path's ε changes with t on the host)");
    } else if (!s.m.defined()) {
      s.m = torch::zeros_like(params_[i]);
      s.v = torch::zeros_like(params_[i]);
    }
    ov.leaf_index[leaf.unsafeGetTensorImpl()] = i;
    ov.pending[i] = 1;
    idx.push_back(i);
  }
  if (idx.empty()) return;
  RefreshDeviceSteps(idx);
  std::vector<torch::Tensor> steps;
  int64_t max_t = 0;
  for (size_t i : idx) {
    State& s = state_[i];
    s.t += 1;
    s.device_t = s.t;
    max_t = std::max(max_t, s.t);
    steps.push_back(s.step);
  }
  at::_foreach_add_(steps, 1.0);
  const torch::Device device = params_[idx.front()].device();
  if (device.is_cuda()) {
    if (capturing) {
      TORCH_CHECK(alpha_table_.defined() && alpha_table_.device() == device,
                  "AdamW: capturing an overlapped step before its α table exists");
    } else {
      EnsureAlphaTable(max_t + 1024, device);
    }
  }
  ov.active = true;
}

void AdamW::OverlappedUpdate(const torch::Tensor& leaf) {
  if (!overlap_ || !overlap_->active) return;
  Overlap& ov = *overlap_;
  const auto it = ov.leaf_index.find(leaf.unsafeGetTensorImpl());
  if (it == ov.leaf_index.end()) return;
  const size_t i = it->second;
  if (!ov.pending[i] || !Grad(i).defined()) return;
  ov.pending[i] = 0;
  torch::NoGradGuard no_grad;
#if BENCHD_WITH_CUDA
  const torch::Tensor& p = params_[i];
  if (p.is_cuda()) {
    const c10::DeviceIndex index = p.device().index();
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(index);
    // The pool hands its streams out in turn: never take the one the backward runs on.
    // BENCHD_OVERLAP_PRIORITY=high (an experiment's knob, read when the stream
    // is taken): the side stream from the high-priority pool, so the block
    // scheduler starts the updates' blocks before the backward's waiting ones.
    const char* priority = std::getenv("BENCHD_OVERLAP_PRIORITY");
    const bool high = priority != nullptr && std::string_view(priority) == "high";
    for (int tries = 0;
         tries < 4 && (!ov.side || ov.side->device_index() != index || *ov.side == current);
         ++tries) {
      ov.side = c10::cuda::getStreamFromPool(high, index);
    }
    // The gradient was made on the current stream (the engine's, for this
    // leaf); the update follows it on the side stream.
    ov.ready.record(current);
    ov.ready.block(*ov.side);
    const c10::cuda::CUDAStreamGuard guard(*ov.side);
    FusedUpdate(i, /*device_step=*/true);
    ov.launched = true;
    return;
  }
#endif
  FusedUpdate(i, /*device_step=*/true);
}

void AdamW::EndOverlappedStep() {
  if (!overlap_ || !overlap_->active) return;
  Overlap& ov = *overlap_;
  ov.active = false;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!ov.pending[i]) continue;
    ov.pending[i] = 0;
    State& s = state_[i];
    if (Grad(i).defined()) {
      FusedUpdate(i, /*device_step=*/true);  // no hook reached it: after the backward
    } else {
      s.t -= 1;  // no gradient, no step (StepFused skips it too)
      s.device_t = s.t;
      s.step.sub_(1.0);
    }
  }
#if BENCHD_WITH_CUDA
  if (ov.launched) {
    const c10::DeviceIndex index = ov.side->device_index();
    ov.done.record(*ov.side);
    ov.done.block(c10::cuda::getCurrentCUDAStream(index));
    ov.launched = false;
  }
#endif
  ov.leaf_index.clear();
}

void AdamW::StepForeachCapturable() {
  CheckNoWeightCopies("the capturable foreach step");
  torch::NoGradGuard no_grad;
  const AdamWOptions& o = options_;
  if (!params_.empty() && IsCapturing(params_.front().device())) {
    // Anything allocated or filled now would be recorded and redone at every
    // replay (zeroing m and v, resetting t), so it must all exist already.
    for (size_t i = 0; i < params_.size(); ++i) {
      const State& s = state_[i];
      TORCH_CHECK(
          !params_[i].grad().defined() || (s.m.defined() && s.step.defined() && s.device_t == s.t),
          "AdamW: capturing a step for a parameter with no optimizer state on the "
          "device yet; run StepForeachCapturable eagerly once before capturing");
    }
  }
  const std::vector<size_t> idx = WithGradients();
  if (idx.empty()) return;
  RefreshDeviceSteps(idx);
  std::vector<torch::Tensor> p, g, m, v, steps;
  for (size_t i : idx) {
    State& s = state_[i];
    // While capturing, this counts the capture, not the replays: SyncHostSteps fixes t after.
    s.t += 1;
    s.device_t = s.t;
    p.push_back(params_[i]);
    g.push_back(params_[i].grad());
    m.push_back(s.m);
    v.push_back(s.v);
    steps.push_back(s.step);
  }
  at::_foreach_add_(steps, 1.0);
  at::_foreach_mul_(m, o.beta1);
  at::_foreach_add_(m, g, 1 - o.beta1);
  at::_foreach_mul_(v, o.beta2);
  at::_foreach_addcmul_(v, g, g, 1 - o.beta2);
  std::vector<torch::Tensor> update = at::_foreach_sqrt(v);
  at::_foreach_add_(update, o.eps);
  update = at::_foreach_div(m, update);  // m / (sqrt(v) + eps)
  // α_t on the device, in float64: 1 − β^t as −expm1(t·ln β), which keeps its
  // digits (1 − 0.999^1 in float32 is off by 1.3e-5 relative).
  const torch::Tensor t = at::stack(steps).to(torch::kFloat64);
  const torch::Tensor bc1 = -torch::expm1(t * std::log(o.beta1));
  const torch::Tensor bc2 = -torch::expm1(t * std::log(o.beta2));
  const torch::Tensor alpha = (o.lr * torch::sqrt(bc2) / bc1).to(p.front().scalar_type());
  at::_foreach_mul_(update, alpha.unbind(0));  // each update times its 0-dim α_t
  at::_foreach_sub_(p, update);
  at::_foreach_add_(p, p, -o.lr * o.weight_decay);
}

void AdamW::SyncHostSteps() {
  // Parameters whose step tensor the host believes current: after graph
  // replays their device value is the truth (it may be ahead of t).
  std::vector<size_t> idx;
  std::vector<torch::Tensor> steps;
  for (size_t i = 0; i < state_.size(); ++i) {
    const State& s = state_[i];
    if (s.step.defined() && s.device_t == s.t) {
      idx.push_back(i);
      steps.push_back(s.step);
    }
  }
  if (idx.empty()) return;
  const torch::Tensor host = at::stack(steps).to(torch::kCPU, torch::kFloat64);
  const auto values = host.accessor<double, 1>();
  for (size_t k = 0; k < idx.size(); ++k) {
    State& s = state_[idx[k]];
    s.t = s.device_t = std::llround(values[static_cast<int64_t>(k)]);
  }
}

std::vector<int64_t> AdamW::Steps() const {
  std::vector<int64_t> out;
  out.reserve(state_.size());
  for (const State& s : state_) out.push_back(s.t);
  return out;
}

}  // namespace benchd::worker
