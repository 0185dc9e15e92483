// FlashAttention-2 forward on the tensor cores (bf16, fp16). Design notes in
// flash_attention_common.cuh.
#include <cmath>

#include "worker/flash/flash_attention_common.cuh"

namespace benchd::worker::flash::detail {
namespace {

// kMT: 16-row m-tiles per warp (each K/V fragment read from shared memory
// feeds kMT mma's, halving shared-memory traffic at kMT = 2); kQRegs: keep Q's
// fragments in registers for the whole loop (else re-read them per key tile,
// which frees registers for head dim 128).
template <typename T, int D, int kWarps, int kBc, int kMT, bool kQRegs>
__global__ void __launch_bounds__(kWarps * 32) FwdKernel(const Params p) {
  constexpr int kThreads = kWarps * 32;
  constexpr int kWR = 16 * kMT;  // rows per warp
  constexpr int kBr = kWR * kWarps;
  constexpr int kS = D + 8;  // shared-memory row pitch, elements
  static_assert(D % 16 == 0 && kBc % 16 == 0, "tile shapes");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* Qs = reinterpret_cast<T*>(smem_raw);
  T* Ks = Qs + kBr * kS;      // [2][kBc][kS]
  T* Vs = Ks + 2 * kBc * kS;  // [2][kBc][kS]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int m_block = p.causal ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : blockIdx.x;
  const int m0 = m_block * kBr;
  const int h = blockIdx.y, b = blockIdx.z;
  const T* qg = static_cast<const T*>(p.q) + b * p.sq.b + h * p.sq.h;
  const T* kg = static_cast<const T*>(p.k) + b * p.sk.b + h * p.sk.h;
  const T* vg = static_cast<const T*>(p.v) + b * p.sv.b + h * p.sv.h;
  T* og = static_cast<T*>(p.out) + b * p.so.b + h * p.so.h;
  float* lse = p.lse_out + (static_cast<int64_t>(b) * p.H + h) * p.Sq;

  const int n_end = p.causal ? min(p.Sk, m0 + kBr) : p.Sk;
  const int n_tiles = (n_end + kBc - 1) / kBc;

  LoadTile<T, D, kBr, kThreads>(Qs, qg, p.sq.s, m0, p.Sq, tid);
  if (n_tiles > 0) {
    LoadTile<T, D, kBc, kThreads>(Ks, kg, p.sk.s, 0, p.Sk, tid);
    LoadTile<T, D, kBc, kThreads>(Vs, vg, p.sv.s, 0, p.Sk, tid);
  }
  CpAsyncCommit();
  CpAsyncWait<0>();
  __syncthreads();

  const T* Qw = Qs + warp * kWR * kS;
  uint32_t qf[kQRegs ? kMT : 1][kQRegs ? D / 16 : 1][4];
  if constexpr (kQRegs) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        Ldsm4(SmemAddr(Qw + (mt * 16 + lane % 16) * kS + kk * 16 + (lane / 16) * 8), qf[mt][kk]);
  }

  float acc[kMT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
      acc[mt][i][0] = acc[mt][i][1] = acc[mt][i][2] = acc[mt][i][3] = 0.f;
  float m_r[kMT][2], l_r[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    m_r[mt][0] = m_r[mt][1] = -INFINITY;
    l_r[mt][0] = l_r[mt][1] = 0.f;
  }
  const int row_base = m0 + warp * kWR;
  const int r_lo = row_base + lane / 4;  // + mt * 16 (+ 8)
  const float sl2 = p.scale_log2;

  for (int j = 0; j < n_tiles; ++j) {
    const int buf = j & 1;
    const int n0 = j * kBc;
    if (j + 1 < n_tiles) {
      LoadTile<T, D, kBc, kThreads>(Ks + (buf ^ 1) * kBc * kS, kg, p.sk.s, n0 + kBc, p.Sk, tid);
      LoadTile<T, D, kBc, kThreads>(Vs + (buf ^ 1) * kBc * kS, vg, p.sv.s, n0 + kBc, p.Sk, tid);
    }
    CpAsyncCommit();
    const bool warp_active = !p.causal || n0 <= row_base + kWR - 1;
    if (warp_active) {
      const T* Kb = Ks + buf * kBc * kS;
      const T* Vb = Vs + buf * kBc * kS;
      float s[kMT][kBc / 8][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int i = 0; i < kBc / 8; ++i)
          s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t qa[kQRegs ? 1 : kMT][4];
        if constexpr (!kQRegs) {
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
            Ldsm4(SmemAddr(Qw + (mt * 16 + lane % 16) * kS + kk * 16 + (lane / 16) * 8), qa[mt]);
        }
#pragma unroll
        for (int np = 0; np < kBc / 16; ++np) {
          uint32_t bf[4];
          Ldsm4(SmemAddr(Kb + (np * 16 + (lane / 16) * 8 + lane % 8) * kS + kk * 16 +
                         ((lane / 8) % 2) * 8),
                bf);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            const uint32_t(&a)[4] =
                kQRegs ? qf[kQRegs ? mt : 0][kQRegs ? kk : 0] : qa[kQRegs ? 0 : mt];
            Tc<T>::Mma(s[mt][2 * np], a, bf[0], bf[1]);
            Tc<T>::Mma(s[mt][2 * np + 1], a, bf[2], bf[3]);
          }
        }
      }
      const bool need_mask = (n0 + kBc > p.Sk) || (p.causal && n0 + kBc - 1 > row_base);
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if (need_mask) {
#pragma unroll
          for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int key = n0 + nt * 8 + (lane % 4) * 2 + (e & 1);
              const int row = r_lo + mt * 16 + (e >= 2 ? 8 : 0);
              if (key >= p.Sk || (p.causal && key > row)) s[mt][nt][e] = -INFINITY;
            }
          }
        }
        float mx[2] = {m_r[mt][0], m_r[mt][1]};
#pragma unroll
        for (int nt = 0; nt < kBc / 8; ++nt) {
          mx[0] = fmaxf(mx[0], fmaxf(s[mt][nt][0], s[mt][nt][1]));
          mx[1] = fmaxf(mx[1], fmaxf(s[mt][nt][2], s[mt][nt][3]));
        }
        float ms[2], alpha[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
          mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
          ms[i] = (mx[i] == -INFINITY) ? 0.f : mx[i] * sl2;
          alpha[i] = Ex2(m_r[mt][i] * sl2 - ms[i]);
          m_r[mt][i] = mx[i];
        }
        float rs[2] = {0.f, 0.f};
#pragma unroll
        for (int nt = 0; nt < kBc / 8; ++nt) {
          s[mt][nt][0] = Ex2(fmaf(s[mt][nt][0], sl2, -ms[0]));
          s[mt][nt][1] = Ex2(fmaf(s[mt][nt][1], sl2, -ms[0]));
          s[mt][nt][2] = Ex2(fmaf(s[mt][nt][2], sl2, -ms[1]));
          s[mt][nt][3] = Ex2(fmaf(s[mt][nt][3], sl2, -ms[1]));
          rs[0] += s[mt][nt][0] + s[mt][nt][1];
          rs[1] += s[mt][nt][2] + s[mt][nt][3];
        }
        l_r[mt][0] = l_r[mt][0] * alpha[0] + rs[0];
        l_r[mt][1] = l_r[mt][1] * alpha[1] + rs[1];
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          acc[mt][dt][0] *= alpha[0];
          acc[mt][dt][1] *= alpha[0];
          acc[mt][dt][2] *= alpha[1];
          acc[mt][dt][3] *= alpha[1];
        }
      }
#pragma unroll
      for (int kt = 0; kt < kBc / 16; ++kt) {
        uint32_t a[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          a[mt][0] = Tc<T>::Pack(s[mt][2 * kt][0], s[mt][2 * kt][1]);
          a[mt][1] = Tc<T>::Pack(s[mt][2 * kt][2], s[mt][2 * kt][3]);
          a[mt][2] = Tc<T>::Pack(s[mt][2 * kt + 1][0], s[mt][2 * kt + 1][1]);
          a[mt][3] = Tc<T>::Pack(s[mt][2 * kt + 1][2], s[mt][2 * kt + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t bf[4];
          Ldsm4T(SmemAddr(Vb + (kt * 16 + lane % 16) * kS + dp * 16 + (lane / 16) * 8), bf);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            Tc<T>::Mma(acc[mt][2 * dp], a[mt], bf[0], bf[1]);
            Tc<T>::Mma(acc[mt][2 * dp + 1], a[mt], bf[2], bf[3]);
          }
        }
      }
    }
    CpAsyncWait<0>();
    __syncthreads();
  }

#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float l = l_r[mt][i];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const int row = r_lo + mt * 16 + i * 8;
      if (lane % 4 == 0 && row < p.Sq)
        lse[row] = l > 0.f ? m_r[mt][i] * p.scale + logf(l) : INFINITY;
      if (row < p.Sq) {
        T* orow = og + static_cast<int64_t>(row) * p.so.s + (lane % 4) * 2;
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt)
          *reinterpret_cast<uint32_t*>(orow + dt * 8) =
              Tc<T>::Pack(acc[mt][dt][2 * i] * inv, acc[mt][dt][2 * i + 1] * inv);
      }
    }
  }
}

template <typename T, int D, int kWarps, int kBc, int kMT, bool kQRegs>
const char* Launch(const Params& p, cudaStream_t stream) {
  constexpr int kBr = 16 * kMT * kWarps;
  constexpr int kS = D + 8;
  constexpr size_t smem = (kBr + 4 * kBc) * kS * sizeof(T);
  auto kernel = FwdKernel<T, D, kWarps, kBc, kMT, kQRegs>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  dim3 grid((p.Sq + kBr - 1) / kBr, p.H, p.B);
  kernel<<<grid, kWarps * 32, smem, stream>>>(p);
  err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

template <typename T>
const char* LaunchDtype(const Params& p, FlashDtype dtype, cudaStream_t stream) {
  // Head dims 64 and 128 on Hopper take the wgmma kernels (flash_attention_sm90.cu);
  // variant 1 forces the mma.sync kernels below (the previous default, for A/B
  // timing), variant 2 an alternative wgmma tile (see LaunchForwardWgmma).
  if (ForwardVariant() != 1 && (p.D == 64 || p.D == 128) && DeviceHasWgmma())
    return LaunchForwardWgmma(p, dtype, ForwardVariant(), stream);
  switch (p.D) {
    case 16:
      return Launch<T, 16, 4, 64, 2, true>(p, stream);
    case 32:
      return Launch<T, 32, 4, 64, 2, true>(p, stream);
    case 64:
      return Launch<T, 64, 4, 64, 2, true>(p, stream);
    case 128:
      return Launch<T, 128, 4, 32, 2, false>(p, stream);
    default:
      return "flash attention: head_dim must be 16, 32, 64 or 128";
  }
}

}  // namespace

const char* LaunchForwardTensorCore(const Params& p, FlashDtype dtype, cudaStream_t stream) {
  if (dtype == FlashDtype::kHalf) return LaunchDtype<__half>(p, dtype, stream);
  return LaunchDtype<__nv_bfloat16>(p, dtype, stream);
}

}  // namespace benchd::worker::flash::detail
