#include "worker/attention_backend.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>

#include <sstream>

#include "common/options.h"

namespace benchd::worker {
namespace {

bool IsForced(v1::AttentionImpl a) {
  return a == v1::ATTENTION_IMPL_SDPA_FLASH || a == v1::ATTENTION_IMPL_SDPA_EFFICIENT ||
         a == v1::ATTENTION_IMPL_SDPA_CUDNN || a == v1::ATTENTION_IMPL_SDPA_MATH;
}

// What at::scaled_dot_product_attention throws when every enabled backend
// refuses the inputs: on a CPU "No viable backend for
// scaled_dot_product_attention" (seen with only efficient or only cudnn
// enabled), on CUDA "No available kernel. Aborting execution." (seen on an
// H200 with flash forced on fp32 inputs).
bool IsNoViableBackend(const c10::Error& e) {
  return e.msg().find("No viable backend for scaled_dot_product_attention") != std::string::npos ||
         e.msg().find("No available kernel. Aborting execution.") != std::string::npos;
}

}  // namespace

torch::Tensor SdpaCausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, v1::AttentionImpl attention,
                                  bool is_causal) {
  try {
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                            is_causal);
  } catch (const c10::Error& e) {
    if (!IsNoViableBackend(e)) throw;
    std::ostringstream what;
    what << "attention " << AttentionName(attention)
         << (IsForced(attention) ? " (forced SDPA backend)" : " (SDPA)") << " cannot run on "
         << q.device() << " for q " << q.sizes() << " " << q.scalar_type() << ", k "
         << k.scalar_type() << ", v " << v.scalar_type()
         << (at::autocast::is_autocast_enabled(q.device().type())
                 ? std::string(" under autocast to ") +
                       c10::toString(at::autocast::get_autocast_dtype(q.device().type()))
                 : std::string())
         << ": LibTorch found no viable kernel (its reasons are warnings in the worker's log)";
    if (attention == v1::ATTENTION_IMPL_SDPA_FLASH || attention == v1::ATTENTION_IMPL_SDPA_CUDNN) {
      what << "; on CUDA this kernel takes fp16/bf16 only";
    }
    throw AttentionBackendUnavailable(what.str());
  }
}

SdpBackendGuard::SdpBackendGuard(v1::AttentionImpl attention) {
  if (!IsForced(attention)) return;
  auto& ctx = at::globalContext();
  active_ = true;
  flash_ = ctx.userEnabledFlashSDP();
  efficient_ = ctx.userEnabledMemEfficientSDP();
  math_ = ctx.userEnabledMathSDP();
  cudnn_ = ctx.userEnabledCuDNNSDP();
  overrideable_ = ctx.userEnabledOverrideableSDP();
  ctx.setSDPUseFlash(attention == v1::ATTENTION_IMPL_SDPA_FLASH);
  ctx.setSDPUseMemEfficient(attention == v1::ATTENTION_IMPL_SDPA_EFFICIENT);
  ctx.setSDPUseCuDNN(attention == v1::ATTENTION_IMPL_SDPA_CUDNN);
  ctx.setSDPUseMath(attention == v1::ATTENTION_IMPL_SDPA_MATH);
  ctx.setSDPUseOverrideable(false);
}

SdpBackendGuard::~SdpBackendGuard() {
  if (!active_) return;
  auto& ctx = at::globalContext();
  ctx.setSDPUseFlash(flash_);
  ctx.setSDPUseMemEfficient(efficient_);
  ctx.setSDPUseMath(math_);
  ctx.setSDPUseCuDNN(cudnn_);
  ctx.setSDPUseOverrideable(overrideable_);
}

}  // namespace benchd::worker
