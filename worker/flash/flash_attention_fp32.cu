// float32 inputs: the same FlashAttention-2 algorithm (online softmax, L
// saved, backward by recomputation) on the CUDA cores in full fp32 (FFMA,
// expf), so the float32 path is exact to fp32 rounding rather than tf32's
// ~1e-3. Not a fast path. Layout: one warp per row; a tile of 32 keys (or
// queries) in shared memory with rows padded to D + 1 floats so that lane j
// reading row j hits bank (j + d) mod 32; lane j computes the score of key j,
// and the weighted sums run with lanes over head-dim elements.
#include <cmath>

#include "worker/flash/flash_attention_common.cuh"

namespace benchd::worker::flash::detail {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block, one row each
constexpr int kTile = 32;

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

template <int D>
__global__ void __launch_bounds__(256) FwdF32Kernel(const Params p) {
  constexpr int kE = (D + 31) / 32;
  __shared__ float Ks[kTile][D + 1];
  __shared__ float Vs[kTile][D];
  __shared__ float Qr[kRowsPerBlock][D];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int h = blockIdx.y, b = blockIdx.z;
  const int m0 = blockIdx.x * kRowsPerBlock;
  const int q = m0 + warp;
  const float* qg = static_cast<const float*>(p.q) + b * p.sq.b + h * p.sq.h;
  const float* kg = static_cast<const float*>(p.k) + b * p.sk.b + h * p.sk.h;
  const float* vg = static_cast<const float*>(p.v) + b * p.sv.b + h * p.sv.h;
  for (int d = lane; d < D; d += 32)
    Qr[warp][d] = q < p.Sq ? qg[static_cast<int64_t>(q) * p.sq.s + d] : 0.f;
  float o[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) o[e] = 0.f;
  float m = -INFINITY, l = 0.f;
  const int n_end = p.causal ? min(p.Sk, m0 + kRowsPerBlock) : p.Sk;
  for (int n0 = 0; n0 < n_end; n0 += kTile) {
    __syncthreads();
    for (int idx = tid; idx < kTile * D; idx += 256) {
      const int r = idx / D, d = idx % D, key = n0 + r;
      Ks[r][d] = key < p.Sk ? kg[static_cast<int64_t>(key) * p.sk.s + d] : 0.f;
      Vs[r][d] = key < p.Sk ? vg[static_cast<int64_t>(key) * p.sv.s + d] : 0.f;
    }
    __syncthreads();
    if (q >= p.Sq) continue;
    const int key = n0 + lane;
    float s = -INFINITY;
    if (key < p.Sk && !(p.causal && key > q)) {
      float acc = 0.f;
#pragma unroll 16
      for (int d = 0; d < D; ++d) acc = fmaf(Qr[warp][d], Ks[lane][d], acc);
      s = acc * p.scale;
    }
    const float mn = fmaxf(m, WarpMax(s));
    if (mn == -INFINITY) continue;
    const float alpha = expf(m - mn);
    const float pv = s == -INFINITY ? 0.f : expf(s - mn);
    l = l * alpha + WarpSum(pv);
#pragma unroll
    for (int e = 0; e < kE; ++e) o[e] *= alpha;
#pragma unroll 4
    for (int jj = 0; jj < kTile; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, pv, jj);
#pragma unroll
      for (int e = 0; e < kE; ++e) {
        const int d = lane + 32 * e;
        if (d < D) o[e] = fmaf(pj, Vs[jj][d], o[e]);
      }
    }
    m = mn;
  }
  if (q >= p.Sq) return;
  float* og =
      static_cast<float*>(p.out) + b * p.so.b + h * p.so.h + static_cast<int64_t>(q) * p.so.s;
  const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
  for (int e = 0; e < kE; ++e) {
    const int d = lane + 32 * e;
    if (d < D) og[d] = o[e] * inv;
  }
  if (lane == 0)
    p.lse_out[(static_cast<int64_t>(b) * p.H + h) * p.Sq + q] = l > 0.f ? m + logf(l) : INFINITY;
}

// dK, dV: one warp per key row, looping over tiles of 32 queries.
template <int D>
__global__ void __launch_bounds__(256) BwdKvF32Kernel(const Params p) {
  constexpr int kE = (D + 31) / 32;
  __shared__ float Qs[kTile][D + 1];
  __shared__ float dOs[kTile][D + 1];
  __shared__ float Ls[kTile], Dls[kTile];
  __shared__ float Kr[kRowsPerBlock][D], Vr[kRowsPerBlock][D];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = static_cast<int64_t>(b) * p.H + h;
  const int n0 = blockIdx.x * kRowsPerBlock;
  const int key = n0 + warp;
  const float* qg = static_cast<const float*>(p.q) + b * p.sq.b + h * p.sq.h;
  const float* kg = static_cast<const float*>(p.k) + b * p.sk.b + h * p.sk.h;
  const float* vg = static_cast<const float*>(p.v) + b * p.sv.b + h * p.sv.h;
  const float* dog = static_cast<const float*>(p.dout) + b * p.sdo.b + h * p.sdo.h;
  for (int d = lane; d < D; d += 32) {
    Kr[warp][d] = key < p.Sk ? kg[static_cast<int64_t>(key) * p.sk.s + d] : 0.f;
    Vr[warp][d] = key < p.Sk ? vg[static_cast<int64_t>(key) * p.sv.s + d] : 0.f;
  }
  float dk[kE], dv[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) dk[e] = dv[e] = 0.f;
  const int m_begin = p.causal ? n0 : 0;
  for (int m0 = m_begin; m0 < p.Sq; m0 += kTile) {
    __syncthreads();
    for (int idx = tid; idx < kTile * D; idx += 256) {
      const int r = idx / D, d = idx % D, qi = m0 + r;
      Qs[r][d] = qi < p.Sq ? qg[static_cast<int64_t>(qi) * p.sq.s + d] : 0.f;
      dOs[r][d] = qi < p.Sq ? dog[static_cast<int64_t>(qi) * p.sdo.s + d] : 0.f;
    }
    if (tid < kTile) {
      const int qi = m0 + tid;
      Ls[tid] = qi < p.Sq ? p.lse[bh * p.Sq + qi] : 0.f;
      Dls[tid] = qi < p.Sq ? p.delta[bh * p.Sq + qi] : 0.f;
    }
    __syncthreads();
    const int qi = m0 + lane;
    float pv = 0.f, ds = 0.f;
    if (key < p.Sk && qi < p.Sq && !(p.causal && key > qi)) {
      float s = 0.f, dpv = 0.f;
#pragma unroll 16
      for (int d = 0; d < D; ++d) {
        s = fmaf(Qs[lane][d], Kr[warp][d], s);
        dpv = fmaf(dOs[lane][d], Vr[warp][d], dpv);
      }
      pv = expf(s * p.scale - Ls[lane]);
      ds = pv * (dpv - Dls[lane]);
    }
#pragma unroll 4
    for (int jj = 0; jj < kTile; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, pv, jj);
      const float dsj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
      for (int e = 0; e < kE; ++e) {
        const int d = lane + 32 * e;
        if (d < D) {
          dv[e] = fmaf(pj, dOs[jj][d], dv[e]);
          dk[e] = fmaf(dsj, Qs[jj][d], dk[e]);
        }
      }
    }
  }
  if (key >= p.Sk) return;
  float* dkg =
      static_cast<float*>(p.dk) + b * p.sdk.b + h * p.sdk.h + static_cast<int64_t>(key) * p.sdk.s;
  float* dvg =
      static_cast<float*>(p.dv) + b * p.sdv.b + h * p.sdv.h + static_cast<int64_t>(key) * p.sdv.s;
#pragma unroll
  for (int e = 0; e < kE; ++e) {
    const int d = lane + 32 * e;
    if (d < D) {
      dkg[d] = dk[e] * p.scale;
      dvg[d] = dv[e];
    }
  }
}

// dQ: one warp per query row, looping over tiles of 32 keys.
template <int D>
__global__ void __launch_bounds__(256) BwdQF32Kernel(const Params p) {
  constexpr int kE = (D + 31) / 32;
  __shared__ float Ks[kTile][D + 1];
  __shared__ float Vs[kTile][D + 1];
  __shared__ float Qr[kRowsPerBlock][D], dOr[kRowsPerBlock][D];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = static_cast<int64_t>(b) * p.H + h;
  const int m0 = blockIdx.x * kRowsPerBlock;
  const int q = m0 + warp;
  const float* qg = static_cast<const float*>(p.q) + b * p.sq.b + h * p.sq.h;
  const float* kg = static_cast<const float*>(p.k) + b * p.sk.b + h * p.sk.h;
  const float* vg = static_cast<const float*>(p.v) + b * p.sv.b + h * p.sv.h;
  const float* dog = static_cast<const float*>(p.dout) + b * p.sdo.b + h * p.sdo.h;
  for (int d = lane; d < D; d += 32) {
    Qr[warp][d] = q < p.Sq ? qg[static_cast<int64_t>(q) * p.sq.s + d] : 0.f;
    dOr[warp][d] = q < p.Sq ? dog[static_cast<int64_t>(q) * p.sdo.s + d] : 0.f;
  }
  const float lq = q < p.Sq ? p.lse[bh * p.Sq + q] : 0.f;
  const float dq_delta = q < p.Sq ? p.delta[bh * p.Sq + q] : 0.f;
  float dq[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) dq[e] = 0.f;
  const int n_end = p.causal ? min(p.Sk, m0 + kRowsPerBlock) : p.Sk;
  for (int n0 = 0; n0 < n_end; n0 += kTile) {
    __syncthreads();
    for (int idx = tid; idx < kTile * D; idx += 256) {
      const int r = idx / D, d = idx % D, key = n0 + r;
      Ks[r][d] = key < p.Sk ? kg[static_cast<int64_t>(key) * p.sk.s + d] : 0.f;
      Vs[r][d] = key < p.Sk ? vg[static_cast<int64_t>(key) * p.sv.s + d] : 0.f;
    }
    __syncthreads();
    const int key = n0 + lane;
    float ds = 0.f;
    if (q < p.Sq && key < p.Sk && !(p.causal && key > q)) {
      float s = 0.f, dpv = 0.f;
#pragma unroll 16
      for (int d = 0; d < D; ++d) {
        s = fmaf(Qr[warp][d], Ks[lane][d], s);
        dpv = fmaf(dOr[warp][d], Vs[lane][d], dpv);
      }
      const float pv = expf(s * p.scale - lq);
      ds = pv * (dpv - dq_delta);
    }
#pragma unroll 4
    for (int jj = 0; jj < kTile; ++jj) {
      const float dsj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
      for (int e = 0; e < kE; ++e) {
        const int d = lane + 32 * e;
        if (d < D) dq[e] = fmaf(dsj, Ks[jj][d], dq[e]);
      }
    }
  }
  if (q >= p.Sq) return;
  float* dqg =
      static_cast<float*>(p.dq) + b * p.sdq.b + h * p.sdq.h + static_cast<int64_t>(q) * p.sdq.s;
#pragma unroll
  for (int e = 0; e < kE; ++e) {
    const int d = lane + 32 * e;
    if (d < D) dqg[d] = dq[e] * p.scale;
  }
}

const char* LastError() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

template <int D>
const char* Fwd(const Params& p, cudaStream_t stream) {
  dim3 grid((p.Sq + kRowsPerBlock - 1) / kRowsPerBlock, p.H, p.B);
  FwdF32Kernel<D><<<grid, 256, 0, stream>>>(p);
  return LastError();
}

template <int D>
const char* Bwd(const Params& p, cudaStream_t stream) {
  if (const char* e = LaunchPreFloat(p, stream)) return e;
  dim3 grid_kv((p.Sk + kRowsPerBlock - 1) / kRowsPerBlock, p.H, p.B);
  BwdKvF32Kernel<D><<<grid_kv, 256, 0, stream>>>(p);
  if (const char* e = LastError()) return e;
  dim3 grid_q((p.Sq + kRowsPerBlock - 1) / kRowsPerBlock, p.H, p.B);
  BwdQF32Kernel<D><<<grid_q, 256, 0, stream>>>(p);
  return LastError();
}

}  // namespace

const char* LaunchForwardFloat(const Params& p, cudaStream_t stream) {
  switch (p.D) {
    case 16:
      return Fwd<16>(p, stream);
    case 32:
      return Fwd<32>(p, stream);
    case 64:
      return Fwd<64>(p, stream);
    case 128:
      return Fwd<128>(p, stream);
    default:
      return "flash attention: head_dim must be 16, 32, 64 or 128";
  }
}

const char* LaunchBackwardFloat(const Params& p, cudaStream_t stream) {
  switch (p.D) {
    case 16:
      return Bwd<16>(p, stream);
    case 32:
      return Bwd<32>(p, stream);
    case 64:
      return Bwd<64>(p, stream);
    case 128:
      return Bwd<128>(p, stream);
    default:
      return "flash attention: head_dim must be 16, 32, 64 or 128";
  }
}

}  // namespace benchd::worker::flash::detail
