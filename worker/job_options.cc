#include "worker/job_options.h"

#include <ATen/Context.h>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "common/model_config.h"
#include "common/options.h"
#include "worker/autocast_guard.h"

namespace benchd::worker {

absl::Status CheckOptionsForDevice(const v1::BenchmarkSpec& spec, const WorkerDevice& device) {
  // The daemon's rule at Submit (common/job_spec.h), checked again here: the
  // worker never trusts its caller.
  return CheckStepOptionsForDevice(spec, device.name);
}

Tf32Guard::Tf32Guard(bool allow_tf32) {
  if (!allow_tf32) return;
  auto& ctx = at::globalContext();
  active_ = true;
  matmul_ = ctx.float32MatmulPrecision();
  cudnn_ = ctx.allowTF32CuDNN();
  ctx.setFloat32MatmulPrecision("high");
  ctx.setAllowTF32CuBLAS(true);
  ctx.setAllowTF32CuDNN(true);
}

Tf32Guard::~Tf32Guard() {
  if (!active_) return;
  auto& ctx = at::globalContext();
  // setFloat32MatmulPrecision sets the legacy field and the per-backend
  // matmul precisions together, so the state stays one the getters accept.
  switch (matmul_) {
    case at::Float32MatmulPrecision::HIGHEST:
      ctx.setFloat32MatmulPrecision("highest");
      break;
    case at::Float32MatmulPrecision::HIGH:
      ctx.setFloat32MatmulPrecision("high");
      break;
    case at::Float32MatmulPrecision::MEDIUM:
      ctx.setFloat32MatmulPrecision("medium");
      break;
  }
  ctx.setAllowTF32CuDNN(cudnn_);
}

void RunOptimizerStep(AdamW& optimizer, const v1::BenchmarkSpec& spec) {
  if (spec.cuda_graph() && spec.optimizer_impl() == v1::OPTIMIZER_IMPL_FOREACH) {
    optimizer.StepForeachCapturable();
    return;
  }
  switch (spec.optimizer_impl()) {
    case v1::OPTIMIZER_IMPL_FOREACH:
      optimizer.StepForeach();
      break;
    case v1::OPTIMIZER_IMPL_FUSED:
      optimizer.StepFused();
      break;
    default:
      optimizer.Step();
      break;
  }
}

JobOptionsScope::JobOptionsScope(const v1::BenchmarkSpec& spec, TransformerLM model,
                                 AdamW& optimizer)
    : model_(std::move(model)),
      optimizer_(optimizer),
      weight_copies_(spec.weight_copies()),
      sdp_(spec.attention()),
      tf32_(spec.allow_tf32()) {
  model_->SetAttention(spec.attention());
  model_->SetFusedOps(spec.fused_ops());
  if (weight_copies_) {
    // Resolved specs ask for copies with bf16 or fp16 only (ResolveBenchmarkOptions).
    optimizer_.SetWeightCopies(model_->MakeWeightCopies(*AutocastDtype(spec.precision())));
  }
}

JobOptionsScope::~JobOptionsScope() {
  model_->SetAttention(v1::ATTENTION_IMPL_FAITHFUL);
  model_->SetFusedOps(false);
  if (weight_copies_) {
    optimizer_.SetWeightCopies({});
    model_->DropWeightCopies();
  }
}

}  // namespace benchd::worker
