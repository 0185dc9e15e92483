#include "worker/adamw_copy_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

namespace benchd::worker {
namespace {

__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float ToFloat(float x) { return x; }
// Round to nearest even, as at::Tensor::to (and so autocast's cast) does.
template <typename Low>
__device__ __forceinline__ Low FromFloat(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}

// kVec elements per access: 16-byte loads of p, m, v and 8-byte loads of g
// and stores of the copy when every pointer allows it.
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

// α for this launch: the host's, or the table's entry for the device's t.
__device__ __forceinline__ float Alpha(const AdamWCopyArgs& a) {
  if (a.step == nullptr) return a.alpha;
  const auto t = static_cast<int64_t>(*a.step);
  if (t >= 0 && t < a.alpha_table_size) return a.alpha_table[t];
  const double td = static_cast<double>(t);
  return static_cast<float>(a.lr * sqrt(1 - pow(a.beta2_d, td)) / (1 - pow(a.beta1_d, td)));
}

// Grad: the gradient's type; Low: the copy's (kCopy), else unused.
template <typename Grad, typename Low, int kVec, bool kCopy>
__global__ void AdamWCopyKernel(float* __restrict__ param, const Grad* __restrict__ grad,
                                float* __restrict__ exp_avg, float* __restrict__ exp_avg_sq,
                                Low* __restrict__ copy, int64_t packs, AdamWCopyArgs a) {
  const float alpha = Alpha(a);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < packs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    auto p = reinterpret_cast<Pack<float, kVec>*>(param)[i];
    auto m = reinterpret_cast<Pack<float, kVec>*>(exp_avg)[i];
    auto v = reinterpret_cast<Pack<float, kVec>*>(exp_avg_sq)[i];
    const auto g = reinterpret_cast<const Pack<Grad, kVec>*>(grad)[i];
    Pack<Low, kVec> c;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float gk = ToFloat(g.v[k]);
      m.v[k] = a.beta1 * m.v[k] + a.one_minus_beta1 * gk;
      v.v[k] = a.beta2 * v.v[k] + a.one_minus_beta2 * gk * gk;
      float pk = p.v[k] - alpha * (m.v[k] / (sqrtf(v.v[k]) + a.eps));
      pk = pk - a.lr_weight_decay * pk;
      p.v[k] = pk;
      if constexpr (kCopy) c.v[k] = FromFloat<Low>(pk);
    }
    reinterpret_cast<Pack<float, kVec>*>(param)[i] = p;
    reinterpret_cast<Pack<float, kVec>*>(exp_avg)[i] = m;
    reinterpret_cast<Pack<float, kVec>*>(exp_avg_sq)[i] = v;
    if constexpr (kCopy) reinterpret_cast<Pack<Low, kVec>*>(copy)[i] = c;
  }
}

bool Aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <typename Grad, typename Low, bool kCopy>
cudaError_t Launch(const AdamWCopyArgs& a, cudaStream_t stream) {
  constexpr int kThreads = 256;
  // Grid-stride beyond: 4096 fills any current GPU.
  const int64_t kMaxBlocks = a.max_blocks > 0 ? a.max_blocks : 4096;
  auto* grad = static_cast<const Grad*>(a.grad);
  auto* copy = static_cast<Low*>(a.copy);
  constexpr int kVec = 4;
  const bool vector = Aligned(a.param, 16) && Aligned(a.exp_avg, 16) && Aligned(a.exp_avg_sq, 16) &&
                      Aligned(grad, sizeof(Grad) * kVec) &&
                      (!kCopy || Aligned(copy, sizeof(Low) * kVec));
  int64_t done = 0;
  if (vector && a.numel >= kVec) {
    const int64_t packs = a.numel / kVec;
    const int blocks =
        static_cast<int>(std::min<int64_t>((packs + kThreads - 1) / kThreads, kMaxBlocks));
    AdamWCopyKernel<Grad, Low, kVec, kCopy>
        <<<blocks, kThreads, 0, stream>>>(a.param, grad, a.exp_avg, a.exp_avg_sq, copy, packs, a);
    done = packs * kVec;
  }
  const int64_t rest = a.numel - done;
  if (rest > 0) {
    const int blocks =
        static_cast<int>(std::min<int64_t>((rest + kThreads - 1) / kThreads, kMaxBlocks));
    AdamWCopyKernel<Grad, Low, 1, kCopy><<<blocks, kThreads, 0, stream>>>(
        a.param + done, grad + done, a.exp_avg + done, a.exp_avg_sq + done,
        kCopy ? copy + done : nullptr, rest, a);
  }
  return cudaGetLastError();
}

}  // namespace

const char* LaunchAdamWCopy(const AdamWCopyArgs& args, void* stream) {
  if (args.numel == 0) return nullptr;
  const auto s = static_cast<cudaStream_t>(stream);
  const cudaError_t err = args.copy == nullptr ? Launch<float, float, false>(args, s)
                          : args.half          ? Launch<__half, __half, true>(args, s)
                                      : Launch<__nv_bfloat16, __nv_bfloat16, true>(args, s);
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace benchd::worker
