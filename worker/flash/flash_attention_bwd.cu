// FlashAttention-2 backward on the tensor cores (bf16, fp16), plus the
// preprocessing (D = rowsum(dO∘O), zeroing the dQ accumulator) and the dQ
// conversion kernels, which the float32 path shares. Design notes in
// flash_attention_common.cuh.
#include <cmath>
#include <type_traits>

#include "worker/flash/flash_attention_common.cuh"

namespace benchd::worker::flash::detail {

// D[b,h,i] = sum_d dO·O in float32 (one warp per row); zeroes dq_accum's row.
template <typename T, int D>
__global__ void __launch_bounds__(256) BwdPreKernel(const Params p) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 8 + warp;
  const int64_t rows = static_cast<int64_t>(p.B) * p.H * p.Sq;
  if (row >= rows) return;
  const int i = static_cast<int>(row % p.Sq);
  const int h = static_cast<int>((row / p.Sq) % p.H);
  const int b = static_cast<int>(row / (static_cast<int64_t>(p.Sq) * p.H));
  const T* o = static_cast<const T*>(p.o) + b * p.so.b + h * p.so.h + i * p.so.s;
  const T* dout = static_cast<const T*>(p.dout) + b * p.sdo.b + h * p.sdo.h + i * p.sdo.s;
  float sum = 0.f;
  for (int d = lane; d < D; d += 32) sum += LoadF(o + d) * LoadF(dout + d);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (lane == 0) p.delta[row] = sum;
  if (p.dq_accum != nullptr)
    for (int d = lane; d < D; d += 32) p.dq_accum[row * D + d] = 0.f;
}

template <typename T, int D>
__global__ void __launch_bounds__(256) DqConvertKernel(const Params p) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t total = static_cast<int64_t>(p.B) * p.H * p.Sq * D;
  if (idx >= total) return;
  const int d = static_cast<int>(idx % D);
  const int64_t row = idx / D;
  const int i = static_cast<int>(row % p.Sq);
  const int h = static_cast<int>((row / p.Sq) % p.H);
  const int b = static_cast<int>(row / (static_cast<int64_t>(p.Sq) * p.H));
  T* dq = static_cast<T*>(p.dq) + b * p.sdq.b + h * p.sdq.h + i * p.sdq.s + d;
  StoreF(dq, p.dq_accum[idx] * p.scale);
}

// The two kernels above for bf16/fp16 with 16-byte accesses (run 18): a thread
// takes 8 elements of a row (D/8 threads per row, in one warp), one 16-byte
// load of O and of dO and two float4 stores of zeros; the conversion reads two
// float4 and writes 16 bytes. The scalar forms spent ~0.12 ms at the
// leaderboard size on 2-byte loads and a 64-bit division per element. Rows are
// 16-byte aligned (LaunchFlashBackward checks the strides).
template <typename T, int D>
__global__ void __launch_bounds__(256) BwdPreVecKernel(const Params p) {
  constexpr int kTpr = D / 8;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  const int64_t row = t / kTpr;
  const int c = static_cast<int>(t % kTpr) * 8;
  const bool live = row < static_cast<int64_t>(p.B) * p.H * p.Sq;
  float sum = 0.f;
  if (live) {
    const int i = static_cast<int>(row % p.Sq);
    const int h = static_cast<int>((row / p.Sq) % p.H);
    const int b = static_cast<int>(row / (static_cast<int64_t>(p.Sq) * p.H));
    const uint4 ov = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.o) + b * p.so.b +
                                                     h * p.so.h + i * p.so.s + c);
    const uint4 dv = *reinterpret_cast<const uint4*>(static_cast<const T*>(p.dout) + b * p.sdo.b +
                                                     h * p.sdo.h + i * p.sdo.s + c);
    const T* oe = reinterpret_cast<const T*>(&ov);
    const T* de = reinterpret_cast<const T*>(&dv);
#pragma unroll
    for (int j = 0; j < 8; ++j) sum += Tc<T>::ToFloat(oe[j]) * Tc<T>::ToFloat(de[j]);
  }
#pragma unroll
  for (int off = kTpr / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (!live) return;
  if (c == 0) p.delta[row] = sum;
  if (p.dq_accum != nullptr) {
    float4* z = reinterpret_cast<float4*>(p.dq_accum + row * D + c);
    z[0] = z[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(256) DqConvertVecKernel(const Params p) {
  constexpr int kTpr = D / 8;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  const int64_t row = t / kTpr;
  const int c = static_cast<int>(t % kTpr) * 8;
  if (row >= static_cast<int64_t>(p.B) * p.H * p.Sq) return;
  const int i = static_cast<int>(row % p.Sq);
  const int h = static_cast<int>((row / p.Sq) % p.H);
  const int b = static_cast<int>(row / (static_cast<int64_t>(p.Sq) * p.H));
  const float4* a = reinterpret_cast<const float4*>(p.dq_accum + row * D + c);
  const float4 x = a[0], y = a[1];
  const float s = p.scale;
  uint4 out;
  out.x = Tc<T>::Pack(x.x * s, x.y * s);
  out.y = Tc<T>::Pack(x.z * s, x.w * s);
  out.z = Tc<T>::Pack(y.x * s, y.y * s);
  out.w = Tc<T>::Pack(y.z * s, y.w * s);
  *reinterpret_cast<uint4*>(static_cast<T*>(p.dq) + b * p.sdq.b + h * p.sdq.h + i * p.sdq.s + c) =
      out;
}

// The dQ conversion for the permuted accumulator of BwdWs128Kernel's kDqPerm (head dim 64,
// Sq % 128 == 0): per 128-query tile and warpgroup w, a 16 KB chunk in which the float4
// number i·128 + t holds thread t's wgmma accumulator values 4i..4i+3: rows
// w·64 + 16·(t/32) + (t%32)/4 (+8 for .z, .w), columns 8i + 2·(t%4) (+1). A thread here
// reads the four float4 of threads 4j..4j+3 (64 contiguous bytes) and writes 8 columns of
// two rows.
template <typename T>
__global__ void __launch_bounds__(256) DqConvertPermKernel(const Params p) {
  const int64_t chunk = blockIdx.x;  // (b·H + h, query tile, w)
  const int g = threadIdx.x, i = g / 32, x = g % 32;
  const int n_q_tiles = p.Sq / 128;
  const int64_t bh = chunk / (2 * n_q_tiles);
  const int qt = static_cast<int>(chunk % (2 * n_q_tiles)) / 2, w = static_cast<int>(chunk % 2);
  const float4* a = reinterpret_cast<const float4*>(p.dq_accum) + chunk * 1024 + i * 128 +
                    (x / 8) * 32 + (x % 8) * 4;
  const float4 f0 = a[0], f1 = a[1], f2 = a[2], f3 = a[3];
  const int row = qt * 128 + w * 64 + (x / 8) * 16 + x % 8;
  const int b = static_cast<int>(bh / p.H), h = static_cast<int>(bh % p.H);
  const float s = p.scale;
  T* dq = static_cast<T*>(p.dq) + b * p.sdq.b + h * p.sdq.h + static_cast<int64_t>(row) * p.sdq.s +
          i * 8;
  uint4 lo, hi;
  lo.x = Tc<T>::Pack(f0.x * s, f0.y * s);
  lo.y = Tc<T>::Pack(f1.x * s, f1.y * s);
  lo.z = Tc<T>::Pack(f2.x * s, f2.y * s);
  lo.w = Tc<T>::Pack(f3.x * s, f3.y * s);
  hi.x = Tc<T>::Pack(f0.z * s, f0.w * s);
  hi.y = Tc<T>::Pack(f1.z * s, f1.w * s);
  hi.z = Tc<T>::Pack(f2.z * s, f2.w * s);
  hi.w = Tc<T>::Pack(f3.z * s, f3.w * s);
  *reinterpret_cast<uint4*>(dq) = lo;
  *reinterpret_cast<uint4*>(dq + 8 * p.sdq.s) = hi;
}

// Backward variant 22 keeps the scalar kernels (A/B timing of the vector ones).
template <typename T, int D>
const char* LaunchPre(const Params& p, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(p.B) * p.H * p.Sq;
  if constexpr (!std::is_same<T, float>::value) {
    if (BackwardVariant() != 22) {
      const int64_t threads = rows * (D / 8);
      BwdPreVecKernel<T, D><<<static_cast<unsigned>((threads + 255) / 256), 256, 0, stream>>>(p);
      cudaError_t err = cudaGetLastError();
      return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
    }
  }
  BwdPreKernel<T, D><<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(p);
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

const char* LaunchPreFloat(const Params& p, cudaStream_t stream) {
  switch (p.D) {
    case 16:
      return LaunchPre<float, 16>(p, stream);
    case 32:
      return LaunchPre<float, 32>(p, stream);
    case 64:
      return LaunchPre<float, 64>(p, stream);
    case 128:
      return LaunchPre<float, 128>(p, stream);
    default:
      return "flash attention: head_dim must be 16, 32, 64 or 128";
  }
}

namespace {

template <typename T, int D, int kWarps, int kBr>
__global__ void __launch_bounds__(kWarps * 32) BwdKernel(const Params p) {
  constexpr int kThreads = kWarps * 32;
  constexpr int kBc = 16 * kWarps;
  constexpr int kS = D + 8;
  constexpr int kSd = kBr + 8;
  static_assert(kThreads >= 2 * kBr, "one thread per L and D value");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* Ks = reinterpret_cast<T*>(smem_raw);                 // [kBc][kS]
  T* Vs = Ks + kBc * kS;                                  // [kBc][kS]
  T* Qs = Vs + kBc * kS;                                  // [2][kBr][kS]
  T* dOs = Qs + 2 * kBr * kS;                             // [2][kBr][kS]
  T* dSs = dOs + 2 * kBr * kS;                            // [kBc][kSd]
  float* Ls = reinterpret_cast<float*>(dSs + kBc * kSd);  // [2][kBr]
  float* Dl = Ls + 2 * kBr;                               // [2][kBr]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int n0 = blockIdx.x * kBc;
  const int h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = static_cast<int64_t>(b) * p.H + h;
  const T* qg = static_cast<const T*>(p.q) + b * p.sq.b + h * p.sq.h;
  const T* kg = static_cast<const T*>(p.k) + b * p.sk.b + h * p.sk.h;
  const T* vg = static_cast<const T*>(p.v) + b * p.sv.b + h * p.sv.h;
  const T* dog = static_cast<const T*>(p.dout) + b * p.sdo.b + h * p.sdo.h;
  const float* lg = p.lse + bh * p.Sq;
  const float* dg = p.delta + bh * p.Sq;
  float* dqa = p.dq_accum + bh * p.Sq * D;

  const int n_q_tiles = (p.Sq + kBr - 1) / kBr;
  const int i_begin = p.causal ? min(n_q_tiles, n0 / kBr) : 0;

  auto load_q_tile = [&](int it, int buf) {
    const int m0 = it * kBr;
    LoadTile<T, D, kBr, kThreads>(Qs + buf * kBr * kS, qg, p.sq.s, m0, p.Sq, tid);
    LoadTile<T, D, kBr, kThreads>(dOs + buf * kBr * kS, dog, p.sdo.s, m0, p.Sq, tid);
    if (tid < kBr) {
      const bool valid = m0 + tid < p.Sq;
      CpAsync4(SmemAddr(Ls + buf * kBr + tid), valid ? lg + m0 + tid : lg, valid);
    } else if (tid < 2 * kBr) {
      const int t = tid - kBr;
      const bool valid = m0 + t < p.Sq;
      CpAsync4(SmemAddr(Dl + buf * kBr + t), valid ? dg + m0 + t : dg, valid);
    }
  };

  LoadTile<T, D, kBc, kThreads>(Ks, kg, p.sk.s, n0, p.Sk, tid);
  LoadTile<T, D, kBc, kThreads>(Vs, vg, p.sv.s, n0, p.Sk, tid);
  if (i_begin < n_q_tiles) load_q_tile(i_begin, 0);
  CpAsyncCommit();
  CpAsyncWait<0>();
  __syncthreads();

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.f;
  const int key_lo = n0 + warp * 16 + lane / 4;
  const float sl2 = p.scale_log2;

  for (int it = i_begin; it < n_q_tiles; ++it) {
    const int buf = (it - i_begin) & 1;
    const int m0 = it * kBr;
    if (it + 1 < n_q_tiles) load_q_tile(it + 1, buf ^ 1);
    CpAsyncCommit();
    const T* Qb = Qs + buf * kBr * kS;
    const T* dOb = dOs + buf * kBr * kS;
    const float* Lb = Ls + buf * kBr;
    const float* Db = Dl + buf * kBr;

    // S^T = K Q^T and dP^T = V dO^T (rows: this warp's 16 keys; cols: queries).
    float s[kBr / 8][4], dp[kBr / 8][4];
#pragma unroll
    for (int i = 0; i < kBr / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[i][e] = dp[i][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t ka[4], va[4];
      Ldsm4(SmemAddr(Ks + (warp * 16 + lane % 16) * kS + kk * 16 + (lane / 16) * 8), ka);
      Ldsm4(SmemAddr(Vs + (warp * 16 + lane % 16) * kS + kk * 16 + (lane / 16) * 8), va);
#pragma unroll
      for (int np = 0; np < kBr / 16; ++np) {
        const int off =
            (np * 16 + (lane / 16) * 8 + lane % 8) * kS + kk * 16 + ((lane / 8) % 2) * 8;
        uint32_t bq[4], bd[4];
        Ldsm4(SmemAddr(Qb + off), bq);
        Ldsm4(SmemAddr(dOb + off), bd);
        Tc<T>::Mma(s[2 * np], ka, bq[0], bq[1]);
        Tc<T>::Mma(s[2 * np + 1], ka, bq[2], bq[3]);
        Tc<T>::Mma(dp[2 * np], va, bd[0], bd[1]);
        Tc<T>::Mma(dp[2 * np + 1], va, bd[2], bd[3]);
      }
    }
    // P^T = exp(S^T·scale − L), masked; dS^T = P^T ∘ (dP^T − D).
    const bool need_mask =
        (m0 + kBr > p.Sq) || (n0 + kBc > p.Sk) || (p.causal && n0 + kBc - 1 > m0);
#pragma unroll
    for (int nt = 0; nt < kBr / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + (lane % 4) * 2 + (e & 1);
        float pv = Ex2(fmaf(s[nt][e], sl2, -Lb[col] * kLog2e));
        if (need_mask) {
          const int q = m0 + col;
          const int key = key_lo + (e >= 2 ? 8 : 0);
          if (q >= p.Sq || key >= p.Sk || (p.causal && key > q)) pv = 0.f;
        }
        s[nt][e] = pv;
        dp[nt][e] = pv * (dp[nt][e] - Db[col]);
      }
    }
    // dV += P^T dO, dK += dS^T Q (A from registers, B = dO / Q via ldmatrix.trans).
#pragma unroll
    for (int kt = 0; kt < kBr / 16; ++kt) {
      const uint32_t pa[4] = {Tc<T>::Pack(s[2 * kt][0], s[2 * kt][1]),
                              Tc<T>::Pack(s[2 * kt][2], s[2 * kt][3]),
                              Tc<T>::Pack(s[2 * kt + 1][0], s[2 * kt + 1][1]),
                              Tc<T>::Pack(s[2 * kt + 1][2], s[2 * kt + 1][3])};
      const uint32_t da[4] = {Tc<T>::Pack(dp[2 * kt][0], dp[2 * kt][1]),
                              Tc<T>::Pack(dp[2 * kt][2], dp[2 * kt][3]),
                              Tc<T>::Pack(dp[2 * kt + 1][0], dp[2 * kt + 1][1]),
                              Tc<T>::Pack(dp[2 * kt + 1][2], dp[2 * kt + 1][3])};
      // dS^T to shared memory for the dQ product below.
      T* dsrow = dSs + (warp * 16 + lane / 4) * kSd + kt * 16 + (lane % 4) * 2;
      *reinterpret_cast<uint32_t*>(dsrow) = da[0];
      *reinterpret_cast<uint32_t*>(dsrow + 8 * kSd) = da[1];
      *reinterpret_cast<uint32_t*>(dsrow + 8) = da[2];
      *reinterpret_cast<uint32_t*>(dsrow + 8 * kSd + 8) = da[3];
#pragma unroll
      for (int dd = 0; dd < D / 16; ++dd) {
        const int off = (kt * 16 + lane % 16) * kS + dd * 16 + (lane / 16) * 8;
        uint32_t bo[4], bq[4];
        Ldsm4T(SmemAddr(dOb + off), bo);
        Ldsm4T(SmemAddr(Qb + off), bq);
        Tc<T>::Mma(dv[2 * dd], pa, bo[0], bo[1]);
        Tc<T>::Mma(dv[2 * dd + 1], pa, bo[2], bo[3]);
        Tc<T>::Mma(dk[2 * dd], da, bq[0], bq[1]);
        Tc<T>::Mma(dk[2 * dd + 1], da, bq[2], bq[3]);
      }
    }
    __syncthreads();
    // dQ[m0 + .., :] += dS K: (query row tile, 32-column chunk) items over warps.
    constexpr int kChunk = D < 32 ? D : 32;
    constexpr int kRowTiles = kBr / 16;
    constexpr int kItems = kRowTiles * (D / kChunk);
#pragma unroll
    for (int item = warp; item < kItems; item += kWarps) {
      const int rt = item % kRowTiles, ch = item / kRowTiles;
      float dq[kChunk / 8][4];
#pragma unroll
      for (int i = 0; i < kChunk / 8; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;
#pragma unroll
      for (int kt = 0; kt < kBc / 16; ++kt) {
        uint32_t a[4];
        Ldsm4T(SmemAddr(dSs + (kt * 16 + (lane / 16) * 8 + lane % 8) * kSd + rt * 16 +
                        ((lane / 8) % 2) * 8),
               a);
#pragma unroll
        for (int dd = 0; dd < kChunk / 16; ++dd) {
          uint32_t bk[4];
          Ldsm4T(
              SmemAddr(Ks + (kt * 16 + lane % 16) * kS + ch * kChunk + dd * 16 + (lane / 16) * 8),
              bk);
          Tc<T>::Mma(dq[2 * dd], a, bk[0], bk[1]);
          Tc<T>::Mma(dq[2 * dd + 1], a, bk[2], bk[3]);
        }
      }
      const int q_lo = m0 + rt * 16 + lane / 4;
#pragma unroll
      for (int nt = 0; nt < kChunk / 8; ++nt) {
        const int col = ch * kChunk + nt * 8 + (lane % 4) * 2;
        if (q_lo < p.Sq)
          AtomicAdd2(dqa + static_cast<int64_t>(q_lo) * D + col, dq[nt][0], dq[nt][1]);
        if (q_lo + 8 < p.Sq)
          AtomicAdd2(dqa + static_cast<int64_t>(q_lo + 8) * D + col, dq[nt][2], dq[nt][3]);
      }
    }
    CpAsyncWait<0>();
    __syncthreads();
  }

  // dK = scale · dS^T Q, dV = P^T dO, in the input dtype.
  T* dkg = static_cast<T*>(p.dk) + b * p.sdk.b + h * p.sdk.h;
  T* dvg = static_cast<T*>(p.dv) + b * p.sdv.b + h * p.sdv.h;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int key = key_lo + i * 8;
    if (key < p.Sk) {
      T* dkr = dkg + static_cast<int64_t>(key) * p.sdk.s + (lane % 4) * 2;
      T* dvr = dvg + static_cast<int64_t>(key) * p.sdv.s + (lane % 4) * 2;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        *reinterpret_cast<uint32_t*>(dkr + dt * 8) =
            Tc<T>::Pack(dk[dt][2 * i] * p.scale, dk[dt][2 * i + 1] * p.scale);
        *reinterpret_cast<uint32_t*>(dvr + dt * 8) = Tc<T>::Pack(dv[dt][2 * i], dv[dt][2 * i + 1]);
      }
    }
  }
}

template <typename T, int D>
const char* LaunchDqConvert(const Params& p, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(p.B) * p.H * p.Sq * D;
  if (BackwardVariant() != 22)
    DqConvertVecKernel<T, D><<<static_cast<unsigned>((total / 8 + 255) / 256), 256, 0, stream>>>(p);
  else
    DqConvertKernel<T, D><<<static_cast<unsigned>((total + 255) / 256), 256, 0, stream>>>(p);
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

template <typename T, int D, int kWarps, int kBr>
const char* Launch(const Params& p, cudaStream_t stream) {
  constexpr int kBc = 16 * kWarps;
  constexpr int kS = D + 8;
  constexpr size_t smem =
      (2 * kBc * kS + 4 * kBr * kS + kBc * (kBr + 8)) * sizeof(T) + 4 * kBr * sizeof(float);
  if (const char* e = LaunchPre<T, D>(p, stream)) return e;
  auto kernel = BwdKernel<T, D, kWarps, kBr>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  dim3 grid((p.Sk + kBc - 1) / kBc, p.H, p.B);
  kernel<<<grid, kWarps * 32, smem, stream>>>(p);
  err = cudaGetLastError();
  if (err != cudaSuccess) return cudaGetErrorString(err);
  return LaunchDqConvert<T, D>(p, stream);
}

// Hopper: the pre-kernel, the wgmma main kernel (flash_attention_sm90.cu), the
// dQ conversion.
template <typename T, int D>
const char* LaunchWgmma(const Params& p, FlashDtype dtype, cudaStream_t stream) {
  if (const char* e = LaunchPre<T, D>(p, stream)) return e;
  bool dq_perm = false;
  if (const char* e = LaunchBackwardWgmmaMain(p, dtype, stream, &dq_perm)) return e;
  if (dq_perm) {
    const int64_t chunks = static_cast<int64_t>(p.B) * p.H * (p.Sq / 128) * 2;
    DqConvertPermKernel<T><<<static_cast<unsigned>(chunks), 256, 0, stream>>>(p);
    cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
  }
  return LaunchDqConvert<T, D>(p, stream);
}

template <typename T>
const char* LaunchDtype(const Params& p, FlashDtype dtype, cudaStream_t stream) {
  // Variant 1: the previous mma.sync kernel for every head dim (A/B timing).
  if (BackwardVariant() != 1 && p.D == 64 && DeviceHasWgmma())
    return LaunchWgmma<T, 64>(p, dtype, stream);
  switch (p.D) {
    case 16:
      return Launch<T, 16, 8, 64>(p, stream);
    case 32:
      return Launch<T, 32, 8, 64>(p, stream);
    case 64:
      return Launch<T, 64, 8, 64>(p, stream);
    case 128:
      return Launch<T, 128, 8, 32>(p, stream);
    default:
      return "flash attention: head_dim must be 16, 32, 64 or 128";
  }
}

}  // namespace

const char* LaunchBackwardTensorCore(const Params& p, FlashDtype dtype, cudaStream_t stream) {
  if (dtype == FlashDtype::kHalf) return LaunchDtype<__half>(p, dtype, stream);
  return LaunchDtype<__nv_bfloat16>(p, dtype, stream);
}

}  // namespace benchd::worker::flash::detail
