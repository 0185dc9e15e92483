#include "worker/rope_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

namespace benchd::worker {
namespace {

__device__ __forceinline__ float Load(const float* p) { return *p; }
__device__ __forceinline__ float Load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float Load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ void Store(float* p, float v) { *p = v; }
__device__ __forceinline__ void Store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void Store(__half* p, float v) { *p = __float2half_rn(v); }

struct Shape {
  int64_t b, h, t, half_d;
  int64_t stride[4];
};

// One thread per pair; idx runs over [B, H, T, D/2] in row-major order.
template <typename T>
__global__ void RopeForwardKernel(const T* __restrict__ x, const float* __restrict__ cos,
                                  const float* __restrict__ sin, float* __restrict__ out, Shape s,
                                  int64_t pairs) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < pairs;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % s.half_d;
    int64_t r = idx / s.half_d;
    const int64_t t = r % s.t;
    r /= s.t;
    const int64_t h = r % s.h;
    const int64_t b = r / s.h;
    const T* px = x + b * s.stride[0] + h * s.stride[1] + t * s.stride[2] + 2 * i * s.stride[3];
    const float x1 = Load(px), x2 = Load(px + s.stride[3]);
    const float c = cos[t * s.half_d + i], sn = sin[t * s.half_d + i];
    // No fused multiply-adds: each op rounds as its own ATen kernel does.
    out[2 * idx] = __fsub_rn(__fmul_rn(c, x1), __fmul_rn(sn, x2));
    out[2 * idx + 1] = __fadd_rn(__fmul_rn(sn, x1), __fmul_rn(c, x2));
  }
}

template <typename T>
__global__ void RopeBackwardKernel(const float* __restrict__ g, const float* __restrict__ cos,
                                   const float* __restrict__ sin, T* __restrict__ grad_x, Shape s,
                                   int64_t pairs) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < pairs;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = (idx / s.half_d) % s.t;
    const int64_t i = idx % s.half_d;
    const float g1 = g[2 * idx], g2 = g[2 * idx + 1];
    const float c = cos[t * s.half_d + i], sn = sin[t * s.half_d + i];
    Store(grad_x + 2 * idx, c * g1 + sn * g2);
    Store(grad_x + 2 * idx + 1, c * g2 - sn * g1);
  }
}

Shape ShapeOf(const RopeArgs& a) {
  return {a.size[0],
          a.size[1],
          a.size[2],
          a.size[3] / 2,
          {a.stride[0], a.stride[1], a.stride[2], a.stride[3]}};
}

int Blocks(int64_t pairs, int threads) {
  return static_cast<int>(std::min<int64_t>((pairs + threads - 1) / threads, 8192));
}

// Calls f(T{}) with T the element type of `dtype`, then reports the launch.
template <typename F>
const char* WithDtype(RopeDtype dtype, F f) {
  switch (dtype) {
    case RopeDtype::kFloat:
      f(float{});
      break;
    case RopeDtype::kBFloat16:
      f(__nv_bfloat16{});
      break;
    case RopeDtype::kHalf:
      f(__half{});
      break;
  }
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

constexpr int kThreads = 256;

}  // namespace

const char* LaunchRopeForward(const RopeArgs& a, float* out, void* stream) {
  const Shape s = ShapeOf(a);
  const int64_t pairs = s.b * s.h * s.t * s.half_d;
  if (pairs == 0) return nullptr;
  return WithDtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    RopeForwardKernel<<<Blocks(pairs, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(a.x), a.cos, a.sin, out, s, pairs);
  });
}

const char* LaunchRopeBackward(const RopeArgs& a, const float* grad_out, void* grad_x,
                               void* stream) {
  const Shape s = ShapeOf(a);
  const int64_t pairs = s.b * s.h * s.t * s.half_d;
  if (pairs == 0) return nullptr;
  return WithDtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    RopeBackwardKernel<<<Blocks(pairs, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        grad_out, a.cos, a.sin, static_cast<T*>(grad_x), s, pairs);
  });
}

}  // namespace benchd::worker
