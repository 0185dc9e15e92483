// Shared pieces of benchd's FlashAttention-2 kernels (internal header).
//
// Design (FlashAttention-2, Dao 2023), and why:
// - bf16/fp16 run on the tensor cores through mma.sync.m16n8k16 (fp32
//   accumulation), operands staged in shared memory by cp.async (16 bytes per
//   thread, zero-filled past the last row, so partial tiles need no special
//   loads) and read into fragments by ldmatrix (.trans for the operands whose
//   reduction dimension runs along a row of shared memory). mma.sync runs on
//   sm_80 and sm_90 alike, so one source serves both; it is not Hopper's
//   fastest path (wgmma + TMA, FlashAttention-3), which is the next step, see
//   bench/flash_attention/RESULTS.md.
// - Shared-memory rows are padded by 8 elements (16 bytes): the 8 rows an
//   ldmatrix phase reads then fall on 8 distinct 16-byte bank groups for every
//   head dim (16, 32, 64, 128), with no swizzle arithmetic.
// - Forward: one CTA per (query tile of 16·warps rows, head, batch); each warp
//   owns 16 query rows and keeps its Q fragments, the running max m, the
//   running sum l (per-thread partial, reduced across the quad once at the
//   end) and the O accumulator in registers; the loop runs over key tiles of
//   kBc, double-buffered (tile j+1 is in flight while tile j is computed).
//   Softmax works in the log2 domain (one FFMA + ex2.approx per score).
//   Causal: key tiles wholly above the diagonal are never loaded (the loop
//   ends at the query tile's last row), warps whose rows all precede the
//   tile skip it, and the mask arithmetic runs only on tiles that straddle
//   the diagonal or the end of K. Causal CTAs are launched heaviest first.
// - Backward: one CTA per key tile (16·warps keys), each warp owning 16 keys
//   and their dK, dV accumulators in registers; the loop runs over query
//   tiles (Q, dO, L, D double-buffered). Per tile: S^T = K Q^T, P^T =
//   exp(S^T·scale − L), dP^T = V dO^T, dV += P^T dO, dS^T = P^T∘(dP^T − D),
//   dK += dS^T Q (all five with P, dS kept in registers as the next mma's A
//   operand), then dS^T goes to shared memory and the CTA computes its
//   partial dQ = dS K, added into a float32 accumulator with vectorised
//   atomics (float2 atomicAdd on sm_90). Atomics instead of a separate dQ
//   pass: the separate pass would recompute S and dP (7 matmuls instead of
//   5). A preprocessing kernel computes D = rowsum(dO∘O) and zeroes the
//   accumulator; a last kernel scales it and writes dQ in the input dtype.
// - float32 inputs run on separate CUDA-core kernels in full fp32 (FFMA,
//   expf): exact to fp32 rounding (a reference, not a fast path).
// - Hopper path (flash_attention_sm90.cu, wgmma wrappers in
//   flash_wgmma.cuh; taken on compute capability 9.0 for bf16/fp16): the
//   forward at head dims 64 and 128 and the backward's main kernel at 64 run
//   on wgmma (sm_90a). Tiles are staged by cp.async from all threads into
//   wgmma's 128-byte-swizzle layout (chunk c of row r at c ^ (r % 8), 64
//   elements per row, D/64 column blocks); Q, K (and Kᵀ) are K-major operands,
//   V, dO, Q-as-B and dSᵀ-as-A MN-major (the transpose bits). Forward: one
//   warpgroup per 64 query rows (3 warpgroups at d64, 2 at d128), 128-key
//   tiles, P kept in registers as the A operand of P·V, FlashAttention-3's
//   intra-warpgroup overlap (S_j = Q K_jᵀ and P_{j-1} V_{j-1} issued together,
//   the softmax of S_j runs while P_{j-1} V_{j-1} is on the tensor cores).
//   Backward (d64): a CTA of two warpgroups owns 128 keys (64 each); per
//   64-query tile Sᵀ, dPᵀ (SS), dV, dK (RS, Pᵀ/dSᵀ from registers), dSᵀ to
//   shared memory, dQ = dS K over the CTA's 128 keys split by columns (32 per
//   warpgroup, B = a Kᵀ copy made once per CTA); dV/dK/dQ of tile i stay in
//   flight while tile i+1's Sᵀ/dPᵀ are issued, and dQ is added to the float32
//   accumulator by one cp.reduce.async.bulk per tile (16 KB) instead of
//   per-thread atomics. Other head dims and other GPUs keep the mma.sync
//   kernels below (forced with variant 1 for A/B timing).
//   Since run 8 the default Hopper kernels are warp-specialised (FwdWsKernel,
//   BwdWsKernel): a producer warpgroup loads tiles by TMA (tensor maps as
//   __grid_constant__ parameters, the same 128-byte swizzle) into mbarrier
//   rings, consumer warpgroups get more registers by setmaxnreg and run
//   without CTA barriers (forward: FA3's round-robin scheduler barrier; backward
//   d64: dQ per warpgroup over its own 64 keys, one bulk reduction each). The
//   cp.async kernels above stay as variant 3 and as the fallback when TMA
//   cannot describe an operand.
//   Since run 15 the d64 backward is BwdWs128Kernel (FlashAttention-3's d64
//   tiling): 128 queries per step, Sᵀ/dPᵀ as m64n128 SS, dV/dK as RS, dSᵀ of
//   both warpgroups to shared memory and one 256-thread barrier, then dQ of
//   query half w over all 128 keys (SS), staged in TMA's 128-byte swizzle and
//   added by cp.reduce.async.bulk.tensor; unmasked steps run without mask code.
//   BwdWsKernel stays as variant 6 (bench/flash_attention/RESULTS.md, runs 13-15).
//   Runs 16-17 kept it: with the tensor pipe busy half of each step (ncu), a
//   variant that runs the previous step's dK (SS) under the exponentials (16,
//   BwdWs128PipeKernel) and variants that move a quarter / half of the
//   exponentials to the FMA pipe (17, 18) were 1-8 % slower; the math pipes are
//   not the limit (stall reasons: MIO throttle, long scoreboard, waits).
//   Since run 25 (variant 40) the consumers no longer issue dQ's reductions:
//   warp 1 of the producer warpgroup does (FlashAttention-3's dQ writer warp,
//   named full/empty barriers per staging slot), the staging is FA3's
//   thread-contiguous layout (STS.128, one plain bulk reduction per 16 KB tile
//   into a tile-permuted accumulator that DqConvertPermKernel converts; only
//   where Sq % 128 == 0, else the swizzled staging and tensor reduction), two
//   slots per warpgroup beside one dSᵀ stage, and the next step's dSᵀ fence
//   covers the dQ stores (fwd+bwd 4.05 -> 3.89 ms at the leaderboard size).
#ifndef BENCHD_WORKER_FLASH_FLASH_ATTENTION_COMMON_CUH_
#define BENCHD_WORKER_FLASH_FLASH_ATTENTION_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "worker/flash/flash_attention_kernel.h"

namespace benchd::worker::flash::detail {

struct Strides {
  int64_t b = 0, h = 0, s = 0;
};

// Everything a kernel needs, passed by value.
struct Params {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;     // backward input
  const void* dout = nullptr;  // backward input
  void* out = nullptr;         // forward output O
  float* lse_out = nullptr;    // forward output L
  const float* lse = nullptr;  // backward input L
  float* delta = nullptr;      // backward workspace D
  float* dq_accum = nullptr;   // backward workspace (bf16/fp16)
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  Strides sq, sk, sv, so, sdo, sdq, sdk, sdv;
  int B = 0, H = 0, Sq = 0, Sk = 0, D = 0;
  float scale = 0.f;       // softmax scale
  float scale_log2 = 0.f;  // scale · log2(e)
  bool causal = false;
  // Grid order of the warp-specialised kernels: false = (tile, head, batch);
  // true = (head·batch, tile), i.e. every head's heaviest causal tile first
  // (longest-processing-time order, no long CTA left for the tail).
  bool lpt = false;
};

// Per-translation-unit launchers (flash_attention_{fwd,bwd,fp32}.cu).
const char* LaunchForwardTensorCore(const Params& p, FlashDtype dtype, cudaStream_t stream);
const char* LaunchBackwardTensorCore(const Params& p, FlashDtype dtype, cudaStream_t stream);
const char* LaunchForwardFloat(const Params& p, cudaStream_t stream);
const char* LaunchBackwardFloat(const Params& p, cudaStream_t stream);
// D = rowsum(dO∘O) for float32 inputs (flash_attention_bwd.cu).
const char* LaunchPreFloat(const Params& p, cudaStream_t stream);
// Hopper wgmma kernels (flash_attention_sm90.cu): forward for head dims 64 and
// 128, the backward's main kernel for head dim 64. Call only when
// DeviceHasWgmma() (compute capability 9.0; the library carries sm_90a code).
bool DeviceHasWgmma();
const char* LaunchForwardWgmma(const Params& p, FlashDtype dtype, int variant, cudaStream_t stream);
// *dq_perm (if given) tells whether the kernel left the float32 dQ accumulator in the
// permuted tile layout of DqConvertPermKernel (flash_attention_bwd.cu) instead of rows.
const char* LaunchBackwardWgmmaMain(const Params& p, FlashDtype dtype, cudaStream_t stream,
                                    bool* dq_perm = nullptr);

// Tile-configuration variants for A/B timing in one process (0 = default).
// Not part of the API: the harness's shim sets them.
int ForwardVariant();
int BackwardVariant();
void SetVariant(int forward, int backward);

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy global -> shared; zero-fills when !valid (no bytes read).
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n)
               : "memory");
}
__device__ __forceinline__ void CpAsync4(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(n)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void Ldsm4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void Ldsm4T(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void AtomicAdd2(float* addr, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(addr), make_float2(a, b));
#else
  atomicAdd(addr, a);
  atomicAdd(addr + 1, b);
#endif
}

__device__ __forceinline__ float Ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <typename T>
struct Tc;

template <>
struct Tc<__half> {
  static __device__ __forceinline__ uint32_t Pack(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }
  static __device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

template <>
struct Tc<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t Pack(float a, float b) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

__device__ __forceinline__ float LoadF(const float* p) { return *p; }
__device__ __forceinline__ float LoadF(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float LoadF(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void StoreF(float* p, float v) { *p = v; }
__device__ __forceinline__ void StoreF(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void StoreF(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// A [kRows, D] tile (rows row0.. of a [n_rows, D] matrix with row stride
// `stride`) into shared memory with row pitch D + 8; rows past n_rows are zero.
template <typename T, int D, int kRows, int kThreads>
__device__ __forceinline__ void LoadTile(T* dst, const T* src, int64_t stride, int row0, int n_rows,
                                         int tid) {
  constexpr int kChunksPerRow = D / 8;
  constexpr int kChunks = kRows * kChunksPerRow;
#pragma unroll
  for (int c = tid; c < kChunks; c += kThreads) {
    const int r = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * 8;
    const int gr = row0 + r;
    const bool valid = gr < n_rows;
    const T* s = valid ? src + static_cast<int64_t>(gr) * stride + col : src;
    CpAsync16(SmemAddr(dst + r * (D + 8) + col), s, valid);
  }
}

// The forward's online softmax and its end, for scores and O in the m16n8
// accumulator layout of mma.sync's C fragments, which is also a warp's part
// of a wgmma accumulator: kN blocks of 8 columns, 4 values each; thread
// `lane` holds row r_lo (values 0, 1) and row r_lo + 8 (values 2, 3), columns
// 8i + 2(lane % 4) + (0, 1) of block i. Both Hopper forward kernels use them
// (the PTX is the same as with their former copies). The mma.sync forward
// (flash_attention_fwd.cu) does the same math on [kMT][kN][4] fragments and
// keeps its own copy: calling these there changed ptxas's register
// allocation (133 registers to 128 plus 8 bytes of spills at sm_90a).

// 2^x on the FMA pipe (run 17; FlashAttention-4's trick against the MUFU limit):
// floor by the round-down add of 1.5·2^23, a degree-3 minimax polynomial for 2^f
// on [0, 1) (relative error 7.5e-5, below bf16's and fp16's rounding of P), the
// integer part added to the exponent field. x is clamped at −126 so that the
// exponent never wraps (2^−126 is as good as 0 next to P's scale).
[[maybe_unused]] __device__ __forceinline__ float Ex2Poly(float x) {
  x = fmaxf(x, -126.f);
  const float j = __fadd_rd(x, 12582912.f);
  const float f = x - (j - 12582912.f);
  const float p = fmaf(fmaf(fmaf(0.07802467f, f, 0.22606698f), f, 0.69583356f), f, 0.99992520f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(j) << 23));
}

// FlashAttention-2's online softmax over one tile of scores s (keys n0..):
// keys past Sk and (causal) keys past the row are masked, the mask worked out
// only where the tile reaches past Sk or past the warp's first row
// warp_row0; the running row max m_r and the thread's partial row sum l_r
// move one tile on; s becomes exp2(S·scale·log2e − m) (the log2 domain: one
// FFMA and one ex2 per score; sl2 is p.scale_log2, read once by the caller),
// and alpha the factors by which the O rows accumulated so far must be
// rescaled. kFx (forward variants of run 18): bit 0 the row max and row sum
// as 4-way trees instead of one serial chain per row (the forward's profile:
// 27 % of its warps' stalls are fixed-latency dependencies); bits 1-2: every
// 8th (1) or 4th (2) block of 8 keys takes its exponentials on the FMA pipe
// (Ex2Poly) instead of MUFU, which the d64 forward keeps as busy as the tensor
// pipe.
template <int kN, int kFx = 0>
__device__ __forceinline__ void OnlineSoftmax(float (&s)[4 * kN], const Params& p, float sl2,
                                              int n0, int warp_row0, int r_lo, int lane,
                                              float (&m_r)[2], float (&l_r)[2], float (&alpha)[2]) {
  constexpr bool kTree = (kFx & 1) != 0 && kN % 4 == 0;
  constexpr int kEmuEvery = ((kFx >> 1) & 3) == 1 ? 8 : ((kFx >> 1) & 3) == 2 ? 4 : 0;
  constexpr int kBc = 8 * kN;
  const bool need_mask = (n0 + kBc > p.Sk) || (p.causal && n0 + kBc - 1 > warp_row0);
  if (need_mask) {
#pragma unroll
    for (int i = 0; i < kN; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = n0 + i * 8 + (lane % 4) * 2 + (e & 1);
        const int row = r_lo + (e >> 1) * 8;
        if (key >= p.Sk || (p.causal && key > row)) s[4 * i + e] = -INFINITY;
      }
  }
  float mx[2] = {m_r[0], m_r[1]};
  if constexpr (kTree) {
    float t[2][4];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int j = 0; j < 4; ++j) t[r][j] = fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]);
#pragma unroll
    for (int i = 4; i < kN; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        t[r][i % 4] = fmaxf(t[r][i % 4], fmaxf(s[4 * i + 2 * r], s[4 * i + 2 * r + 1]));
#pragma unroll
    for (int r = 0; r < 2; ++r)
      mx[r] = fmaxf(mx[r], fmaxf(fmaxf(t[r][0], t[r][1]), fmaxf(t[r][2], t[r][3])));
  } else {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      mx[0] = fmaxf(mx[0], fmaxf(s[4 * i], s[4 * i + 1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[4 * i + 2], s[4 * i + 3]));
    }
  }
  float ms[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    ms[r] = (mx[r] == -INFINITY) ? 0.f : mx[r] * sl2;
    alpha[r] = Ex2(m_r[r] * sl2 - ms[r]);
    m_r[r] = mx[r];
  }
  float rs[2] = {0.f, 0.f};
  if constexpr (kTree || kEmuEvery > 0) {
    float t[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int i = 0; i < kN; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = fmaf(s[4 * i + e], sl2, -ms[e >> 1]);
        constexpr int kEvery = kEmuEvery > 0 ? kEmuEvery : kN + 1;
        s[4 * i + e] = (i % kEvery == kEvery - 1) ? Ex2Poly(x) : Ex2(x);
      }
      constexpr int kAcc = kTree ? 4 : 1;
      t[0][i % kAcc] += s[4 * i] + s[4 * i + 1];
      t[1][i % kAcc] += s[4 * i + 2] + s[4 * i + 3];
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) rs[r] = (t[r][0] + t[r][1]) + (t[r][2] + t[r][3]);
  } else {
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      s[4 * i] = Ex2(fmaf(s[4 * i], sl2, -ms[0]));
      s[4 * i + 1] = Ex2(fmaf(s[4 * i + 1], sl2, -ms[0]));
      s[4 * i + 2] = Ex2(fmaf(s[4 * i + 2], sl2, -ms[1]));
      s[4 * i + 3] = Ex2(fmaf(s[4 * i + 3], sl2, -ms[1]));
      rs[0] += s[4 * i] + s[4 * i + 1];
      rs[1] += s[4 * i + 2] + s[4 * i + 3];
    }
  }
  l_r[0] = l_r[0] * alpha[0] + rs[0];
  l_r[1] = l_r[1] * alpha[1] + rs[1];
}

// O's rows times OnlineSoftmax's alpha.
template <int kN>
__device__ __forceinline__ void RescaleRows(float (&o)[4 * kN], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    o[4 * i] *= alpha[0];
    o[4 * i + 1] *= alpha[0];
    o[4 * i + 2] *= alpha[1];
    o[4 * i + 3] *= alpha[1];
  }
}

// The forward's end for one fragment's rows: the quad's partial sums added,
// L = m·scale + ln l (+inf for a row that saw no key) and O / l in T, for
// rows below Sq. og and lse point at the (batch, head)'s O and L.
template <typename T, int kN>
__device__ __forceinline__ void StoreRows(const float (&o)[4 * kN], const float (&m_r)[2],
                                          const float (&l_r)[2], const Params& p, int r_lo,
                                          int lane, T* og, float* lse) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_r[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int row = r_lo + r * 8;
    if (row < p.Sq) {
      if (lane % 4 == 0) lse[row] = l > 0.f ? m_r[r] * p.scale + logf(l) : INFINITY;
      T* orow = og + static_cast<int64_t>(row) * p.so.s + (lane % 4) * 2;
#pragma unroll
      for (int i = 0; i < kN; ++i)
        *reinterpret_cast<uint32_t*>(orow + i * 8) =
            Tc<T>::Pack(o[4 * i + 2 * r] * inv, o[4 * i + 2 * r + 1] * inv);
    }
  }
}

}  // namespace benchd::worker::flash::detail

#endif  // BENCHD_WORKER_FLASH_FLASH_ATTENTION_COMMON_CUH_
