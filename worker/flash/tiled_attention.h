// FlashAttention-2's algorithm written with ATen ops (CS336 "Systems" §1.3.2
// (a)): the reference benchd's fused kernels (flash_attention_kernel.h) are
// checked against, and the `tiled` implementation that runs on a CPU as on a
// GPU. q: [..., Sq, d], k and v: [..., Sk, d] (leading dimensions are batch
// and heads, any number of them), any lengths: the last tiles are partial.
//
// Forward: for each query tile of `q_tile` rows, for each key tile of
// `k_tile` columns, S = Q Kᵀ·scale, the running row max m and sum l rescaled
// online, O accumulated unnormalised in fp32, then O /= l and
// L = m + log(l). With `causal` (top-left, query i sees keys j <= i) key tiles
// wholly above the diagonal are skipped and the diagonal tile is masked.
//
// Backward, by recomputation from Q, K, V, O, dO and L alone: D = rowsum(dO ∘
// O); per tile P = exp(S − L), dV += Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP − D),
// dQ += dS K·scale, dK += dSᵀ Q·scale.
//
// Every product and sum is in fp32 (inputs of lower precision are widened
// tile by tile); O, dQ, dK and dV come back in the inputs' dtype, L in fp32.
#ifndef BENCHD_WORKER_FLASH_TILED_ATTENTION_H_
#define BENCHD_WORKER_FLASH_TILED_ATTENTION_H_

#include <torch/torch.h>

#include <cstdint>
#include <optional>

namespace benchd::worker {

struct TiledAttentionOptions {
  int64_t q_tile = 64;  // >= 16
  int64_t k_tile = 64;  // >= 16
  bool causal = false;
  std::optional<double> scale;  // unset: 1/sqrt(d)
};

struct TiledForward {
  torch::Tensor out;  // [..., Sq, d], q's dtype
  torch::Tensor lse;  // [..., Sq], fp32: logsumexp of each query's scaled scores
};

struct TiledGrads {
  torch::Tensor dq, dk, dv;  // the inputs' shapes and dtype
};

// Throws c10::Error naming the option for tiles under 16, mismatched shapes,
// or causal with Sq != Sk.
TiledForward TiledAttentionForward(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, const TiledAttentionOptions& options);

TiledGrads TiledAttentionBackward(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& out,
                                  const torch::Tensor& lse, const torch::Tensor& grad_out,
                                  const TiledAttentionOptions& options);

// The two as one differentiable op (a torch::autograd::Function): the
// forward saves Q, K, V, O and L; the backward is TiledAttentionBackward.
// The attention request's `tiled` implementation and the model's.
torch::Tensor TiledAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const TiledAttentionOptions& options);

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_FLASH_TILED_ATTENTION_H_
