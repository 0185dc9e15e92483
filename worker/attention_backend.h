// Attention through at::scaled_dot_product_attention (BenchmarkSpec.attention),
// and the guard that forces one of its backends.
#ifndef BENCHD_WORKER_ATTENTION_BACKEND_H_
#define BENCHD_WORKER_ATTENTION_BACKEND_H_

#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "benchd/v1/bench.pb.h"

namespace benchd::worker {

// A forced SDPA backend that cannot run these inputs on this device. The
// benchmark reports it as INVALID_ARGUMENT (a request this device cannot
// serve), not as an internal error.
class AttentionBackendUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// at::scaled_dot_product_attention(q, k, v, no mask, dropout 0, is_causal)
// with the default scale 1/sqrt(d_k): the same math as the course's
// ScaledDotProductAttention with CausalMask (T == S, so the causal mask is
// the same top-left lower triangle). q, k, v: [B, H, T, d_k]. When `attention`
// forces a backend and LibTorch finds no usable kernel ("No viable backend"),
// throws AttentionBackendUnavailable naming the backend, device, dtype and
// shape (LibTorch's reasons go to the worker's log as warnings).
// `is_causal` false (the attention request's non-causal cells) drops the mask.
torch::Tensor SdpaCausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, v1::AttentionImpl attention,
                                  bool is_causal = true);

// For a forced backend (ATTENTION_IMPL_SDPA_FLASH/EFFICIENT/CUDNN/MATH), turns that
// backend's process-wide switch on and every other one off (math included:
// no silent fallback), and restores all of them when it dies. For
// ATTENTION_IMPL_FAITHFUL and ATTENTION_IMPL_SDPA it changes nothing (SDPA then picks
// among the backends enabled, all by default). The switches are global to the
// process; the worker runs one job at a time.
class SdpBackendGuard {
 public:
  explicit SdpBackendGuard(v1::AttentionImpl attention);
  ~SdpBackendGuard();
  SdpBackendGuard(const SdpBackendGuard&) = delete;
  SdpBackendGuard& operator=(const SdpBackendGuard&) = delete;

 private:
  bool active_ = false;
  bool flash_ = true, efficient_ = true, math_ = true, cudnn_ = true, overrideable_ = true;
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_ATTENTION_BACKEND_H_
