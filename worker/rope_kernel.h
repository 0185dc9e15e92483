// The fused_ops option's RoPE: the course's rotation of interleaved pairs as
// one CUDA kernel forward and one backward, instead of ~10 elementwise
// kernels each way. Plain CUDA, no LibTorch (compiled by nvcc on its own, as
// adamw_copy_kernel.cu); worker/rope.cc wraps it in an autograd function.
#ifndef BENCHD_WORKER_ROPE_KERNEL_H_
#define BENCHD_WORKER_ROPE_KERNEL_H_

#include <cstdint>

namespace benchd::worker {

enum class RopeDtype { kFloat, kBFloat16, kHalf };

// x: [B, H, T, D] with any strides (the heads view of a projection), of
// `dtype`; cos, sin: [>= T, D/2] contiguous float32 (rows 0..T-1 used).
struct RopeArgs {
  const void* x = nullptr;
  RopeDtype dtype = RopeDtype::kFloat;
  int64_t size[4] = {0, 0, 0, 0};
  int64_t stride[4] = {0, 0, 0, 0};  // in elements
  const float* cos = nullptr;
  const float* sin = nullptr;
};

// out [B, H, T, D] contiguous float32, pair (x1, x2) at (2i, 2i+1):
//   out1 = cos·x1 − sin·x2,  out2 = sin·x1 + cos·x2
// each product and sum rounded to float32 as the course's ops round them, so
// the result is the faithful RoPE's bit for bit.
const char* LaunchRopeForward(const RopeArgs& args, float* out, void* stream);

// The backward of that: with g the gradient of out (contiguous float32),
//   grad1 = cos·g1 + sin·g2,  grad2 = cos·g2 − sin·g1
// in float32, written as `args.dtype` into grad_x ([B, H, T, D] contiguous).
const char* LaunchRopeBackward(const RopeArgs& args, const float* grad_out, void* grad_x,
                               void* stream);

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_ROPE_KERNEL_H_
