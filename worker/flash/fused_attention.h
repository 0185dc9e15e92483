// The `fused` attention (ATTENTION_IMPL_FUSED): benchd's own FlashAttention-2
// CUDA kernels (flash_attention_kernel.h) as a LibTorch autograd function, for
// the attention request and the model. The forward is one kernel that writes
// O and the logsumexp L; the backward recomputes the scores from Q, K, V, O,
// dO and L (no score matrix is kept), with its float32 workspace (D =
// rowsum(dO∘O) and the dQ accumulator) from the CUDA caching allocator. Both
// run on the current CUDA stream (so they are captured by a CUDA graph).
//
// q: [B, H, Sq, d], k and v: [B, H, Sk, d]; d 16, 32, 64 or 128; causal is
// top-left (query i sees keys j <= i: the model's mask when Sq == Sk).
// bf16/fp16 run on the tensor cores (wgmma on compute capability 9.0 for
// d 64 and 128, mma.sync elsewhere); float32 runs on separate CUDA-core
// kernels in full fp32 (exact to fp32 rounding, a reference rather than a fast
// path). Under autocast the inputs are cast to the autocast dtype first, as
// at::scaled_dot_product_attention's are; otherwise q, k and v run in their
// common dtype. Operands whose layout the kernels cannot read (last dimension
// not contiguous, bf16/fp16 rows not 16-byte aligned) are copied first.
#ifndef BENCHD_WORKER_FLASH_FUSED_ATTENTION_H_
#define BENCHD_WORKER_FLASH_FUSED_ATTENTION_H_

#include <torch/torch.h>

#include <string>

namespace benchd::worker {

// The head dims the kernels are built for.
bool FusedAttentionHeadDim(int64_t head_dim);

// Why FusedAttention cannot run q, k, v (after the autocast cast), or "" when
// it can: not a CUDA tensor, a worker built without CUDA, a dtype other than
// float32/bf16/fp16, a head dim the kernels lack, shapes that do not match, or
// a batch or head count over 65535 (the kernels' grid).
std::string FusedAttentionRefusal(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v);

// The differentiable op (the attention request's `fused` implementation and
// the model's). Throws AttentionBackendUnavailable (worker/attention_backend.h:
// INVALID_ARGUMENT naming the request's field) with FusedAttentionRefusal's
// reason, and c10::Error when a launch fails.
torch::Tensor FusedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             bool causal);

// The two launches alone, without autograd, for tests: q, k, v of one dtype,
// in a layout the kernels read (FusedAttention prepares them).
struct FusedForward {
  torch::Tensor out;  // [B, H, Sq, d], q's dtype
  torch::Tensor lse;  // [B, H, Sq] float32: logsumexp of each query's scaled scores
};
struct FusedGrads {
  torch::Tensor dq, dk, dv;  // [B, H, S, d] contiguous, the inputs' dtype
};
FusedForward FusedAttentionForward(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, bool causal);
FusedGrads FusedAttentionBackward(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& out,
                                  const torch::Tensor& lse, const torch::Tensor& grad_out,
                                  bool causal);

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_FLASH_FUSED_ATTENTION_H_
