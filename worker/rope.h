// RoPE through benchd's fused CUDA kernel (worker/rope_kernel.cu) as an
// autograd function: the fused_ops option's rotation. Same result as the
// course's ops (RotaryEmbeddingImpl's faithful path) bit for bit forward;
// backward in float32 with one rounding to x's dtype, where the course's ops
// round each term to it.
#ifndef BENCHD_WORKER_ROPE_H_
#define BENCHD_WORKER_ROPE_H_

#include <torch/torch.h>

namespace benchd::worker {

// x [B, H, T, D] (any strides) of float32, bf16 or fp16 on a CUDA device;
// cos, sin [T, D/2] float32 contiguous on the same device. Returns [B, H, T, D]
// float32 contiguous, as the course's RoPE does (fp32 tables promote x).
// Throws (c10::Error) on a build without CUDA or a tensor it cannot take.
torch::Tensor FusedRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_ROPE_H_
