// Hopper (sm_90a) FlashAttention kernels on wgmma, bf16/fp16, head dims 64
// (forward, backward) and 128 (forward). Design notes in
// flash_attention_common.cuh ("Hopper path"); the wgmma wrappers are in
// flash_wgmma.cuh. Compiled for other targets, the kernels are empty and the
// launchers are never called (flash_attention_{fwd,bwd}.cu check the device).
#include <cuda.h>  // CUtensorMap (the encoder comes through the runtime's driver entry point)

#include <cmath>
#include <type_traits>

#include "worker/flash/flash_attention_common.cuh"
#include "worker/flash/flash_wgmma.cuh"

namespace benchd::worker::flash::detail {
namespace {

// A [kRows, D] tile into shared memory in wgmma's 128-byte-swizzle layout:
// D/64 column blocks of [kRows][64] elements (128-byte rows), 16-byte chunk c
// of row r at chunk position c ^ (r % 8). `dst` must be 1024-byte aligned.
// Rows past n_rows are zero-filled.
template <typename T, int D, int kRows, int kThreads>
__device__ __forceinline__ void LoadTileSw(uint32_t dst, const T* src, int64_t stride, int row0,
                                           int n_rows, int tid) {
  constexpr int kC = D / 8;
  constexpr int kChunks = kRows * kC;
  constexpr int kIters = (kChunks + kThreads - 1) / kThreads;
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int c = tid + i * kThreads;
    if (kChunks % kThreads == 0 || c < kChunks) {
      const int r = c / kC, c8 = c % kC;
      const int gr = row0 + r;
      const bool valid = gr < n_rows;
      const T* s = valid ? src + static_cast<int64_t>(gr) * stride + c8 * 8 : src;
      const uint32_t off = (c8 / 8) * (kRows * 128) + r * 128 + (((c8 % 8) ^ (r % 8)) << 4);
      CpAsync16(dst + off, s, valid);
    }
  }
}

template <typename T>
__device__ __forceinline__ void PackA(const float* s, uint32_t (&a)[4]) {
  a[0] = Tc<T>::Pack(s[0], s[1]);
  a[1] = Tc<T>::Pack(s[2], s[3]);
  a[2] = Tc<T>::Pack(s[4], s[5]);
  a[3] = Tc<T>::Pack(s[6], s[7]);
}

// The two float32 values of a packed bf16x2 / f16x2 (Tc<T>::Pack's order: .x low).
template <typename T>
__device__ __forceinline__ float2 UnpackPair(uint32_t v) {
  if constexpr (std::is_same<T, __half>::value) {
    return __half22float2(*reinterpret_cast<const __half2*>(&v));
  } else {
    return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
  }
}

// Raw shared-memory and barrier wrappers, used by the kernels' sm_90a bodies
// only (compiled for another target those bodies are empty, and so is this).
#ifdef BENCHD_FLASH_WGMMA
__device__ __forceinline__ void StShared32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ uint16_t LdShared16(uint32_t addr) {
  uint16_t v;
  asm volatile("ld.shared.b16 %0, [%1];\n" : "=h"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void StShared16(uint32_t addr, uint16_t v) {
  asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(addr), "h"(v) : "memory");
}
#endif

// ---------------------------------------------------------------------------
// Forward. kWG warpgroups, each owning 64 query rows (kBr = 64·kWG per CTA);
// key tiles of kBc, K and V in two-stage rings filled by cp.async from all
// threads. Per key tile j (FlashAttention-3's intra-warpgroup overlap): issue
// S_j = Q K_jᵀ and O += P_{j-1} V_{j-1} back to back, wait for S_j only, run
// the softmax of S_j while the tensor cores do P_{j-1} V_{j-1}, then wait,
// rescale O and pack P_j (bf16/fp16 A fragments in registers).
template <typename T, int D, int kWG, int kBc>
__global__ void __launch_bounds__(kWG * 128, 1) FwdWgmmaKernel(const Params p) {
#ifdef BENCHD_FLASH_WGMMA
  constexpr int kThreads = kWG * 128;
  constexpr int kBr = 64 * kWG;
  constexpr uint32_t kQBytes = kBr * D * 2, kKVBytes = kBc * D * 2;
  static_assert(D % 64 == 0 && kBc % 16 == 0, "tile shapes");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (SmemAddr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sQ = base, sK = sQ + kQBytes, sV = sK + 2 * kKVBytes;

  const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int m_block = p.causal ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : blockIdx.x;
  const int m0 = m_block * kBr;
  const int h = blockIdx.y, b = blockIdx.z;
  const T* qg = static_cast<const T*>(p.q) + b * p.sq.b + h * p.sq.h;
  const T* kg = static_cast<const T*>(p.k) + b * p.sk.b + h * p.sk.h;
  const T* vg = static_cast<const T*>(p.v) + b * p.sv.b + h * p.sv.h;
  T* og = static_cast<T*>(p.out) + b * p.so.b + h * p.so.h;
  float* lse = p.lse_out + (static_cast<int64_t>(b) * p.H + h) * p.Sq;

  const int n_end = p.causal ? min(p.Sk, m0 + kBr) : p.Sk;
  const int n_tiles = (n_end + kBc - 1) / kBc;  // >= 1

  LoadTileSw<T, D, kBr, kThreads>(sQ, qg, p.sq.s, m0, p.Sq, tid);
  LoadTileSw<T, D, kBc, kThreads>(sK, kg, p.sk.s, 0, p.Sk, tid);
  CpAsyncCommit();
  CpAsyncWait<0>();
  wg::FenceProxyAsync();
  __syncthreads();
  if (n_tiles > 1) LoadTileSw<T, D, kBc, kThreads>(sK + kKVBytes, kg, p.sk.s, kBc, p.Sk, tid);
  LoadTileSw<T, D, kBc, kThreads>(sV, vg, p.sv.s, 0, p.Sk, tid);
  CpAsyncCommit();

  // Q (A) and K (B) are K-major: k-step kk is column block kk/4, +32 bytes per
  // step inside the 128-byte swizzled row. V (B) is MN-major: 16 keys per step.
  const uint32_t sQw = sQ + wgi * 64 * 128;
  auto gemm_s = [&](float(&s)[kBc / 2], uint32_t sKb) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wg::Mma<T, kBc>::template SS<0, 0>(
          s, wg::Desc(sQw + (kk / 4) * (kBr * 128) + (kk % 4) * 32, 16, 1024),
          wg::Desc(sKb + (kk / 4) * (kBc * 128) + (kk % 4) * 32, 16, 1024), kk > 0 ? 1 : 0);
  };
  float o[D / 2];
  uint32_t pf[kBc / 16][4];
  auto gemm_pv = [&](uint32_t sVb) {
#pragma unroll
    for (int ks = 0; ks < kBc / 16; ++ks)
      wg::Mma<T, D>::template RS<1>(o, pf[ks], wg::Desc(sVb + ks * 16 * 128, kBc * 128, 1024), 1);
  };

#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.f, 0.f};
  const int warp_row0 = m0 + wgi * 64 + warp * 16;
  const int r_lo = warp_row0 + lane / 4;
  const float sl2 = p.scale_log2;

  // S (in place) -> exp2(S·scale·log2e − m); returns the rescale factors.
  auto softmax = [&](float(&s)[kBc / 2], int n0, float(&alpha)[2]) {
    OnlineSoftmax<kBc / 8>(s, p, sl2, n0, warp_row0, r_lo, lane, m_r, l_r, alpha);
  };

  {
    float s[kBc / 2];
    wg::Fence();
    gemm_s(s, sK);
    wg::Commit();
    wg::Wait<0>();
    wg::FenceRegs(s);
    float alpha[2];
    softmax(s, 0, alpha);
#pragma unroll
    for (int ks = 0; ks < kBc / 16; ++ks) PackA<T>(s + 8 * ks, pf[ks]);
  }

  for (int j = 1; j <= n_tiles; ++j) {
    CpAsyncWait<0>();
    wg::FenceProxyAsync();
    __syncthreads();  // K_j and V_{j-1} landed; every warpgroup is done with K_{j-1}, V_{j-2}
    if (j + 1 < n_tiles)
      LoadTileSw<T, D, kBc, kThreads>(sK + ((j + 1) & 1) * kKVBytes, kg, p.sk.s, (j + 1) * kBc,
                                      p.Sk, tid);
    if (j < n_tiles)
      LoadTileSw<T, D, kBc, kThreads>(sV + (j & 1) * kKVBytes, vg, p.sv.s, j * kBc, p.Sk, tid);
    CpAsyncCommit();
    const uint32_t sVb = sV + ((j - 1) & 1) * kKVBytes;
    if (j < n_tiles) {
      float s[kBc / 2];
      wg::FenceRegs(o);
      wg::Fence();
      gemm_s(s, sK + (j & 1) * kKVBytes);
      wg::Commit();
      gemm_pv(sVb);
      wg::Commit();
      wg::Wait<1>();
      wg::FenceRegs(s);
      float alpha[2];
      softmax(s, j * kBc, alpha);
      wg::Wait<0>();
      wg::FenceRegs(o);
      RescaleRows<D / 8>(o, alpha);
#pragma unroll
      for (int ks = 0; ks < kBc / 16; ++ks) PackA<T>(s + 8 * ks, pf[ks]);
    } else {
      wg::FenceRegs(o);
      wg::Fence();
      gemm_pv(sVb);
      wg::Commit();
      wg::Wait<0>();
      wg::FenceRegs(o);
    }
  }

  StoreRows<T, D / 8>(o, m_r, l_r, p, r_lo, lane, og, lse);
#endif
}

template <typename T, int D, int kWG, int kBc>
const char* LaunchFwd(const Params& p, cudaStream_t stream) {
  constexpr int kBr = 64 * kWG;
  constexpr size_t smem = (kBr + 4 * kBc) * D * 2 + 1024;
  auto kernel = FwdWgmmaKernel<T, D, kWG, kBc>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  dim3 grid((p.Sq + kBr - 1) / kBr, p.H, p.B);
  kernel<<<grid, kWG * 128, smem, stream>>>(p);
  err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

// ---------------------------------------------------------------------------
// Warp-specialised forward (FlashAttention-3's structure). Warpgroup 0 is the
// producer: one thread loads Q once and K_j, V_j per key tile with TMA
// (cp.async.bulk.tensor, 128-byte swizzle, the same layout LoadTileSw makes)
// into kStages-deep rings, each slot completing on an mbarrier (full) and
// released by the consumers on another (empty; K_j as soon as S_j is done,
// V_j after P_j V_j). Warpgroups 1..kCWG are consumers of 64 query rows each,
// with the loop body of FwdWgmmaKernel (S_j and P_{j-1}V_{j-1} issued back to
// back, softmax of S_j under P_{j-1}V_{j-1}). No CTA-wide barrier in the loop,
// so the consumers drift apart; with kSched the GEMM issue of the consumers is
// additionally ordered round-robin by named barriers (FA3's warp-scheduler
// barrier), so one warpgroup's softmax runs while another's GEMMs do.
// setmaxnreg: producer 24/32 registers, consumers 240/160 (2/3 consumers).
#ifdef BENCHD_FLASH_WGMMA
__device__ __forceinline__ void MbarInit(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void MbarExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void MbarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void MbarWait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred P1;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void TmaLoad4d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                          int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
#endif
template <int N>
__device__ __forceinline__ void SetMaxNRegDec() {
#ifdef BENCHD_FLASH_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}
template <int N>
__device__ __forceinline__ void SetMaxNRegInc() {
#ifdef BENCHD_FLASH_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// kFx (run 18, forward variants 30-33): OnlineSoftmax's kFx (tree reductions,
// part of the exponentials on the FMA pipe).
template <typename T, int D, int kCWG, int kBc, int kStages, bool kSched, int kFx = 0>
__global__ void __launch_bounds__((kCWG + 1) * 128, 1)
    FwdWsKernel(const Params p, const __grid_constant__ CUtensorMap tq,
                const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv) {
#ifdef BENCHD_FLASH_WGMMA
  constexpr int kBr = 64 * kCWG;
  constexpr uint32_t kQBytes = kBr * D * 2, kKVBytes = kBc * D * 2;
  constexpr int kRegP = kCWG == 2 ? 24 : 32, kRegC = kCWG == 2 ? 240 : 160;
  static_assert(kCWG >= 1 && kCWG <= 3 && D % 64 == 0 && kBc % 16 == 0, "shapes");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (SmemAddr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sQ = base, sK = sQ + kQBytes, sV = sK + kStages * kKVBytes;
  const uint32_t bars = sV + kStages * kKVBytes;
  const uint32_t barQ = bars;
  auto full_k = [&](int s) { return bars + 8u * (1 + s); };
  auto full_v = [&](int s) { return bars + 8u * (1 + kStages + s); };
  auto empty_k = [&](int s) { return bars + 8u * (1 + 2 * kStages + s); };
  auto empty_v = [&](int s) { return bars + 8u * (1 + 3 * kStages + s); };

  const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int blk = p.lpt ? static_cast<int>(blockIdx.y) : static_cast<int>(blockIdx.x);
  const int n_blk = p.lpt ? static_cast<int>(gridDim.y) : static_cast<int>(gridDim.x);
  const int m_block = p.causal ? n_blk - 1 - blk : blk;
  const int m0 = m_block * kBr;
  const int h = p.lpt ? static_cast<int>(blockIdx.x) % p.H : static_cast<int>(blockIdx.y);
  const int b = p.lpt ? static_cast<int>(blockIdx.x) / p.H : static_cast<int>(blockIdx.z);
  const int n_end = p.causal ? min(p.Sk, m0 + kBr) : p.Sk;
  const int n_tiles = (n_end + kBc - 1) / kBc;  // >= 1, the same for every warpgroup

  if (tid == 0) {
    MbarInit(barQ, 1);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      MbarInit(full_k(s), 1);
      MbarInit(full_v(s), 1);
      MbarInit(empty_k(s), 4 * kCWG);  // one arrival per consumer warp
      MbarInit(empty_v(s), 4 * kCWG);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wgi == 0) {  // producer
    SetMaxNRegDec<kRegP>();
    if (warp == 0 && lane == 0) {
      MbarExpectTx(barQ, kQBytes);
#pragma unroll
      for (int cb = 0; cb < D / 64; ++cb)
        TmaLoad4d(sQ + cb * (kBr * 128), &tq, barQ, cb * 64, m0, h, b);
      auto load = [&](const CUtensorMap* map, uint32_t ring, uint32_t full, uint32_t empty, int j) {
        if (j >= kStages) MbarWait(empty, ((j / kStages) & 1) ^ 1);
        MbarExpectTx(full, kKVBytes);
#pragma unroll
        for (int cb = 0; cb < D / 64; ++cb)
          TmaLoad4d(ring + cb * (kBc * 128), map, full, cb * 64, j * kBc, h, b);
      };
      const int s0 = 0;
      load(&tk, sK, full_k(s0), empty_k(s0), 0);
      for (int j = 0; j < n_tiles; ++j) {
        if (j + 1 < n_tiles) {
          const int s = (j + 1) % kStages;
          load(&tk, sK + s * kKVBytes, full_k(s), empty_k(s), j + 1);
        }
        const int s = j % kStages;
        load(&tv, sV + s * kKVBytes, full_v(s), empty_v(s), j);
      }
    }
    return;
  }

  SetMaxNRegInc<kRegC>();
  const int cw = wgi - 1;
  T* og = static_cast<T*>(p.out) + b * p.so.b + h * p.so.h;
  float* lse = p.lse_out + (static_cast<int64_t>(b) * p.H + h) * p.Sq;

  const uint32_t sQw = sQ + cw * 64 * 128;
  auto gemm_s = [&](float(&s)[kBc / 2], uint32_t sKb) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wg::Mma<T, kBc>::template SS<0, 0>(
          s, wg::Desc(sQw + (kk / 4) * (kBr * 128) + (kk % 4) * 32, 16, 1024),
          wg::Desc(sKb + (kk / 4) * (kBc * 128) + (kk % 4) * 32, 16, 1024), kk > 0 ? 1 : 0);
  };
  float o[D / 2];
  uint32_t pf[kBc / 16][4];
  auto gemm_pv = [&](uint32_t sVb) {
#pragma unroll
    for (int ks = 0; ks < kBc / 16; ++ks)
      wg::Mma<T, D>::template RS<1>(o, pf[ks], wg::Desc(sVb + ks * 16 * 128, kBc * 128, 1024), 1);
  };
  // FA3's warp-scheduler barrier: consumer cw issues its GEMMs after cw-1 did
  // (named barriers 1..kCWG, 256 = this warpgroup's sync + the previous one's
  // arrive); the last consumer's last arrive is skipped so that none dangles.
  auto sched_sync = [&]() {
    if (kSched && kCWG > 1) asm volatile("bar.sync %0, 256;\n" ::"r"(1 + cw) : "memory");
  };
  auto sched_arrive = [&](bool last) {
    if (kSched && kCWG > 1 && !(last && cw == kCWG - 1))
      asm volatile("bar.arrive %0, 256;\n" ::"r"(1 + (cw + 1) % kCWG) : "memory");
  };

#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.f, 0.f};
  const int warp_row0 = m0 + cw * 64 + warp * 16;
  const int r_lo = warp_row0 + lane / 4;
  const float sl2 = p.scale_log2;

  auto softmax = [&](float(&s)[kBc / 2], int n0, float(&alpha)[2]) {
    OnlineSoftmax<kBc / 8, kFx>(s, p, sl2, n0, warp_row0, r_lo, lane, m_r, l_r, alpha);
  };

  MbarWait(barQ, 0);
  if (kSched && kCWG > 1 && cw == 0) asm volatile("bar.arrive 1, 256;\n" ::: "memory");
  {
    float s[kBc / 2];
    MbarWait(full_k(0), 0);
    sched_sync();
    wg::Fence();
    gemm_s(s, sK);
    wg::Commit();
    sched_arrive(n_tiles == 1);
    wg::Wait<0>();
    wg::FenceRegs(s);
    if (lane == 0) MbarArrive(empty_k(0));
    float alpha[2];
    softmax(s, 0, alpha);
#pragma unroll
    for (int ks = 0; ks < kBc / 16; ++ks) PackA<T>(s + 8 * ks, pf[ks]);
  }

  for (int j = 1; j < n_tiles; ++j) {
    const int sk = j % kStages, sv = (j - 1) % kStages;
    MbarWait(full_k(sk), (j / kStages) & 1);
    MbarWait(full_v(sv), ((j - 1) / kStages) & 1);
    float s[kBc / 2];
    sched_sync();
    wg::FenceRegs(o);
    wg::Fence();
    gemm_s(s, sK + sk * kKVBytes);
    wg::Commit();
    gemm_pv(sV + sv * kKVBytes);
    wg::Commit();
    sched_arrive(j == n_tiles - 1);
    wg::Wait<1>();
    wg::FenceRegs(s);
    if (lane == 0) MbarArrive(empty_k(sk));
    float alpha[2];
    softmax(s, j * kBc, alpha);
    wg::Wait<0>();
    wg::FenceRegs(o);
    if (lane == 0) MbarArrive(empty_v(sv));
    RescaleRows<D / 8>(o, alpha);
#pragma unroll
    for (int ks = 0; ks < kBc / 16; ++ks) PackA<T>(s + 8 * ks, pf[ks]);
  }
  {
    const int sv = (n_tiles - 1) % kStages;
    MbarWait(full_v(sv), ((n_tiles - 1) / kStages) & 1);
    wg::FenceRegs(o);
    wg::Fence();
    gemm_pv(sV + sv * kKVBytes);
    wg::Commit();
    wg::Wait<0>();
    wg::FenceRegs(o);
  }

  StoreRows<T, D / 8>(o, m_r, l_r, p, r_lo, lane, og, lse);
#endif
}

// cuTensorMapEncodeTiled through the runtime's driver entry point (no -lcuda).
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
EncodeTiledFn GetEncodeTiled() {
  static EncodeTiledFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return static_cast<EncodeTiledFn>(nullptr);
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

// A [B, H, S, D] operand as a 4-D tensor map {D, S, H, B}, boxes of
// [box_rows][64] elements (128-byte rows), 128-byte swizzle; rows past S read
// as zeros. False when TMA cannot describe it (strides not multiples of 16
// bytes, a misaligned base): the caller falls back to the cp.async kernel.
template <typename T>
bool MakeTensorMap(CUtensorMap* map, const void* ptr, const Strides& st, const Params& p, int S,
                   int box_rows) {
  EncodeTiledFn enc = GetEncodeTiled();
  if (enc == nullptr) return false;
  if ((reinterpret_cast<uintptr_t>(ptr) & 15) != 0) return false;
  const int64_t sb[3] = {st.s * 2, st.h * 2, st.b * 2};
  for (int64_t x : sb)
    if (x <= 0 || (x & 15) != 0 || x >= (int64_t(1) << 40)) return false;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.D), static_cast<cuuint64_t>(S),
                              static_cast<cuuint64_t>(p.H), static_cast<cuuint64_t>(p.B)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(sb[0]), static_cast<cuuint64_t>(sb[1]),
                                 static_cast<cuuint64_t>(sb[2])};
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t es[4] = {1, 1, 1, 1};
  const CUtensorMapDataType dt = std::is_same<T, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                                : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  return enc(map, dt, 4, const_cast<void*>(ptr), dims, strides, box, es,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <typename T, int D, int kCWG, int kBc, int kStages, bool kSched, int kFx = 0>
const char* LaunchFwdWs(const Params& p, cudaStream_t stream) {
  constexpr int kBr = 64 * kCWG;
  CUtensorMap tq, tk, tv;
  if (!MakeTensorMap<T>(&tq, p.q, p.sq, p, p.Sq, kBr) ||
      !MakeTensorMap<T>(&tk, p.k, p.sk, p, p.Sk, kBc) ||
      !MakeTensorMap<T>(&tv, p.v, p.sv, p, p.Sk, kBc))
    return LaunchFwd<T, D, (D == 64 ? 3 : 2), 128>(p, stream);
  constexpr size_t smem = (kBr + 2 * kStages * kBc) * D * 2 + 1024 + 8 * (1 + 4 * kStages);
  auto kernel = FwdWsKernel<T, D, kCWG, kBc, kStages, kSched, kFx>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  const unsigned n_blk = (p.Sq + kBr - 1) / kBr;
  const dim3 grid = p.lpt ? dim3(p.H * p.B, n_blk, 1) : dim3(n_blk, p.H, p.B);
  kernel<<<grid, (kCWG + 1) * 128, smem, stream>>>(p, tq, tk, tv);
  err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

// ---------------------------------------------------------------------------
// Backward, head dim 64. One CTA per 128-key tile, two warpgroups of 64 keys;
// the loop runs over 64-query tiles (Q, dO, L, D double-buffered). Per tile,
// per warpgroup: Sᵀ = K Qᵀ and dPᵀ = V dOᵀ (SS), Pᵀ and dSᵀ in registers,
// dV += Pᵀ dO and dK += dSᵀ Q (RS, dO and Q MN-major), dSᵀ to shared memory;
// then dQ = dS K over all 128 keys of the CTA, each warpgroup taking 32 of the
// 64 columns (A = dSᵀ MN-major, B = a transposed copy of K made once per CTA),
// added into the float32 accumulator with float2 atomics.
template <typename T, int D>
__global__ void __launch_bounds__(256, 1) BwdWgmmaKernel(const Params p) {
#ifdef BENCHD_FLASH_WGMMA
  static_assert(D == 64, "head dim 64 only");
  constexpr int kBc = 128, kBr = 64, kThreads = 256, kQBuf = 3;
  constexpr uint32_t kKBytes = kBc * D * 2, kQBytes = kBr * D * 2, kSBytes = kBc * kBr * 2;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (SmemAddr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sK = base, sV = sK + kKBytes, sKt = sV + kKBytes, sQ = sKt + kKBytes,
                 sdO = sQ + kQBuf * kQBytes, sdS = sdO + kQBuf * kQBytes, sdQ = sdS + 2 * kSBytes;
  constexpr uint32_t kdQBytes = kBr * D * 4;  // one [64][64] float32 dQ tile
  float* Ls = reinterpret_cast<float*>(smem_raw + (sdQ + 2 * kdQBytes - SmemAddr(smem_raw)));
  float* Dl = Ls + kQBuf * kBr;

  const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
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
    LoadTileSw<T, D, kBr, kThreads>(sQ + buf * kQBytes, qg, p.sq.s, m0, p.Sq, tid);
    LoadTileSw<T, D, kBr, kThreads>(sdO + buf * kQBytes, dog, p.sdo.s, m0, p.Sq, tid);
    if (tid < kBr) {
      const bool valid = m0 + tid < p.Sq;
      CpAsync4(SmemAddr(Ls + buf * kBr + tid), valid ? lg + m0 + tid : lg, valid);
    } else if (tid < 2 * kBr) {
      const int t = tid - kBr;
      const bool valid = m0 + t < p.Sq;
      CpAsync4(SmemAddr(Dl + buf * kBr + t), valid ? dg + m0 + t : dg, valid);
    }
  };

  LoadTileSw<T, D, kBc, kThreads>(sK, kg, p.sk.s, n0, p.Sk, tid);
  LoadTileSw<T, D, kBc, kThreads>(sV, vg, p.sv.s, n0, p.Sk, tid);
  if (i_begin < n_q_tiles) load_q_tile(i_begin, 0);
  CpAsyncCommit();
  CpAsyncWait<0>();
  __syncthreads();
  // Kᵀ [64 d][128 keys] as two 64-key column blocks, swizzled like every tile.
  for (int idx = tid; idx < kBc * D; idx += kThreads) {
    const int key = idx % kBc, d = idx / kBc;
    const uint16_t v = LdShared16(sK + key * 128 + (((d / 8) ^ (key % 8)) << 4) + (d % 8) * 2);
    const int kb = key / 64, kc = key % 64;
    StShared16(sKt + kb * (D * 128) + d * 128 + (((kc / 8) ^ (d % 8)) << 4) + (kc % 8) * 2, v);
  }

  float dk[D / 2], dv[D / 2], dq[16];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) dq[i] = 0.f;
  uint32_t pa[kBr / 16][4], da[kBr / 16][4];
#pragma unroll
  for (int ks = 0; ks < kBr / 16; ++ks)
    pa[ks][0] = pa[ks][1] = pa[ks][2] = pa[ks][3] = da[ks][0] = da[ks][1] = da[ks][2] = da[ks][3] =
        0u;
  const int key_lo = n0 + wgi * 64 + warp * 16 + lane / 4;
  const int key_row_l = wgi * 64 + warp * 16 + lane / 4;  // row in the CTA's key tile
  const float sl2 = p.scale_log2;
  const uint32_t sKw = sK + wgi * 64 * 128, sVw = sV + wgi * 64 * 128;

  // dQ of a query tile goes into the float32 accumulator by one bulk
  // reduce-add per CTA (cp.reduce.async.bulk, 16 KB, the accumulator's rows
  // being contiguous at D = 64) instead of per-thread atomics: each warpgroup
  // writes its 32 columns into a [64][64] float32 staging tile (two slots,
  // alternating per iteration), and thread 0 issues the reduction after a barrier.
  auto dq_stage = [&](uint32_t slot) {
    const int r_lo = warp * 16 + lane / 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int col = wgi * 32 + i * 8 + (lane % 4) * 2;
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(slot + (r_lo * D + col) * 4),
                   "f"(dq[4 * i]), "f"(dq[4 * i + 1])
                   : "memory");
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(slot + ((r_lo + 8) * D + col) * 4),
                   "f"(dq[4 * i + 2]), "f"(dq[4 * i + 3])
                   : "memory");
    }
  };
  auto dq_reduce = [&](uint32_t slot, int m0) {  // thread 0, after a barrier
    const uint32_t bytes = static_cast<uint32_t>(min(kBr, p.Sq - m0)) * D * 4;
    asm volatile(
        "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
            dqa + static_cast<int64_t>(m0) * D),
        "r"(slot), "r"(bytes)
        : "memory");
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
  };

  // Software pipeline across query tiles: dV/dK and dQ of tile i stay in flight
  // on the tensor cores while tile i+1's Sᵀ/dPᵀ are issued; tile i's dQ atomics
  // run after that wait. Q/dO/L/D: three buffers (tile i+1 loads while tile i-1's
  // dV/dK may still read theirs); dSᵀ: two buffers (tile i's dQ of the other
  // warpgroup may still read it while this one writes tile i+1's).
  for (int it = i_begin; it < n_q_tiles; ++it) {
    const int buf = (it - i_begin) % kQBuf;
    const int m0 = it * kBr;
    CpAsyncWait<0>();
    wg::FenceProxyAsync();
    __syncthreads();
    const uint32_t sQb = sQ + buf * kQBytes, sdOb = sdO + buf * kQBytes;
    const uint32_t sdSb = sdS + ((it - i_begin) & 1) * kSBytes;
    const float* Lb = Ls + buf * kBr;
    const float* Db = Dl + buf * kBr;

    float st[kBr / 2], dpt[kBr / 2];
    wg::Fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wg::Mma<T, kBr>::template SS<0, 0>(st, wg::Desc(sKw + kk * 32, 16, 1024),
                                         wg::Desc(sQb + kk * 32, 16, 1024), kk > 0 ? 1 : 0);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wg::Mma<T, kBr>::template SS<0, 0>(dpt, wg::Desc(sVw + kk * 32, 16, 1024),
                                         wg::Desc(sdOb + kk * 32, 16, 1024), kk > 0 ? 1 : 0);
    wg::Commit();
    if (it + 1 < n_q_tiles) load_q_tile(it + 1, (buf + 1) % kQBuf);
    CpAsyncCommit();
    wg::Wait<0>();
    wg::FenceRegs(st);
    wg::FenceRegs(dpt);
    wg::FenceRegs(dq);
    wg::FenceRegs(dv);
    wg::FenceRegs(dk);
    wg::FenceRegs(pa);
    wg::FenceRegs(da);
    const uint32_t dq_slot = sdQ + ((it - i_begin) & 1) * kdQBytes;
    if (it > i_begin) dq_stage(dq_slot);  // tile it-1's dQ

    const bool need_mask =
        (m0 + kBr > p.Sq) || (n0 + kBc > p.Sk) || (p.causal && n0 + kBc - 1 > m0);
#pragma unroll
    for (int i = 0; i < kBr / 8; ++i) {
      const int col = i * 8 + (lane % 4) * 2;
      const float2 lv = *reinterpret_cast<const float2*>(Lb + col);
      const float2 dd = *reinterpret_cast<const float2*>(Db + col);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float l = (e & 1) ? lv.y : lv.x;
        const float dl = (e & 1) ? dd.y : dd.x;
        float pv = Ex2(fmaf(st[4 * i + e], sl2, -l * kLog2e));
        if (need_mask) {
          const int q = m0 + col + (e & 1);
          const int key = key_lo + (e >> 1) * 8;
          if (q >= p.Sq || key >= p.Sk || (p.causal && key > q)) pv = 0.f;
        }
        st[4 * i + e] = pv;
        dpt[4 * i + e] = pv * (dpt[4 * i + e] - dl);
      }
    }
#pragma unroll
    for (int ks = 0; ks < kBr / 16; ++ks) {
      PackA<T>(st + 8 * ks, pa[ks]);
      PackA<T>(dpt + 8 * ks, da[ks]);
    }
    wg::Fence();
#pragma unroll
    for (int ks = 0; ks < kBr / 16; ++ks)
      wg::Mma<T, D>::template RS<1>(dv, pa[ks], wg::Desc(sdOb + ks * 16 * 128, kBr * 128, 1024), 1);
#pragma unroll
    for (int ks = 0; ks < kBr / 16; ++ks)
      wg::Mma<T, D>::template RS<1>(dk, da[ks], wg::Desc(sQb + ks * 16 * 128, kBr * 128, 1024), 1);
    wg::Commit();
    // dSᵀ [128 keys][64 queries] to shared memory (swizzled 128-byte rows).
#pragma unroll
    for (int ks = 0; ks < kBr / 16; ++ks)
#pragma unroll
      for (int c = 0; c < 2; ++c)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = key_row_l + r * 8;
          const int chunk = 2 * ks + c;
          StShared32(sdSb + row * 128 + ((chunk ^ (row % 8)) << 4) + (lane % 4) * 4,
                     da[ks][2 * c + r]);
        }
    wg::FenceProxyAsync();
    __syncthreads();
    if (tid == 0 && it > i_begin) dq_reduce(dq_slot, m0 - kBr);
    wg::Fence();
#pragma unroll
    for (int ks = 0; ks < kBc / 16; ++ks)
      wg::Mma<T, 32>::template SS<1, 0>(
          dq, wg::Desc(sdSb + ks * 16 * 128, 8192, 1024),
          wg::Desc(sKt + (ks / 4) * (D * 128) + wgi * 32 * 128 + (ks % 4) * 32, 16, 1024),
          ks > 0 ? 1 : 0);
    wg::Commit();
    // the staging slot written next iteration was last read by the reduction
    // issued one iteration before this one
    if (tid == 0) asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory");
  }
  wg::Wait<0>();
  wg::FenceRegs(dq);
  wg::FenceRegs(dv);
  wg::FenceRegs(dk);
  wg::FenceRegs(pa);
  wg::FenceRegs(da);
  if (i_begin < n_q_tiles) {
    const uint32_t dq_slot = sdQ + ((n_q_tiles - i_begin) & 1) * kdQBytes;
    __syncthreads();
    dq_stage(dq_slot);
    wg::FenceProxyAsync();
    __syncthreads();
    if (tid == 0) {
      dq_reduce(dq_slot, (n_q_tiles - 1) * kBr);
      asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    }
  }

  T* dkg = static_cast<T*>(p.dk) + b * p.sdk.b + h * p.sdk.h;
  T* dvg = static_cast<T*>(p.dv) + b * p.sdv.b + h * p.sdv.h;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = key_lo + r * 8;
    if (key < p.Sk) {
      T* dkr = dkg + static_cast<int64_t>(key) * p.sdk.s + (lane % 4) * 2;
      T* dvr = dvg + static_cast<int64_t>(key) * p.sdv.s + (lane % 4) * 2;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        *reinterpret_cast<uint32_t*>(dkr + i * 8) =
            Tc<T>::Pack(dk[4 * i + 2 * r] * p.scale, dk[4 * i + 2 * r + 1] * p.scale);
        *reinterpret_cast<uint32_t*>(dvr + i * 8) =
            Tc<T>::Pack(dv[4 * i + 2 * r], dv[4 * i + 2 * r + 1]);
      }
    }
  }
#endif
}

template <typename T, int D>
const char* LaunchBwd(const Params& p, cudaStream_t stream) {
  // K, V, Kᵀ; Q and dO × 3; dSᵀ × 2; dQ staging × 2 (float32); L and D × 3; alignment slack
  constexpr size_t smem =
      (3 * 128 * D + 6 * 64 * D + 2 * 128 * 64) * 2 + 2 * 64 * D * 4 + 6 * 64 * 4 + 1024;
  auto kernel = BwdWgmmaKernel<T, D>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  dim3 grid((p.Sk + 127) / 128, p.H, p.B);
  kernel<<<grid, 256, smem, stream>>>(p);
  err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

// ---------------------------------------------------------------------------
// Warp-specialised backward, head dim 64. Warpgroup 0 is the producer: one
// thread loads K, V of the CTA's 128 keys once and, per 64-query tile, Q and
// dO by TMA into a kQBuf-deep ring; its warp loads L and D by cp.async, which
// arrives on the same mbarrier (cp.async.mbarrier.arrive.noinc). Warpgroups 1
// and 2 own 64 keys each and never wait for each other: per tile Sᵀ, dPᵀ (SS),
// dV, dK (RS), dSᵀ of their own keys to shared memory, then dQ_w = dS_w K_w
// over their own 64 keys (M 64 queries, N 64, K as an MN-major B: no Kᵀ copy),
// staged as float32 and added into the accumulator by one
// cp.reduce.async.bulk per warpgroup and tile (so two 16 KB reductions per
// tile instead of one, in exchange for no CTA barrier). The only barriers in
// the loop are mbarriers (ring) and a per-warpgroup named barrier.
template <typename T, int D, bool kPipe, bool kSched, bool kKReg>
__global__ void __launch_bounds__(384, 1)
    BwdWsKernel(const Params p, const __grid_constant__ CUtensorMap tq,
                const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv,
                const __grid_constant__ CUtensorMap tdo) {
#ifdef BENCHD_FLASH_WGMMA
  static_assert(D == 64, "head dim 64 only");
  constexpr int kBc = 128, kBr = 64, kQBuf = 3;
  constexpr uint32_t kKBytes = kBc * D * 2, kQBytes = kBr * D * 2, kSBytes = kBc * kBr * 2;
  constexpr uint32_t kdQBytes = kBr * D * 4;  // one [64][64] float32 dQ tile
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (SmemAddr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sK = base, sV = sK + kKBytes, sQ = sV + kKBytes, sdO = sQ + kQBuf * kQBytes,
                 sdS = sdO + kQBuf * kQBytes,
                 sdQ = sdS + 2 * kSBytes;   // sdQ: 2 warpgroups × 2 slots
  const uint32_t sLD = sdQ + 4 * kdQBytes;  // L then D, kQBuf × 64 floats each
  float* Ls = reinterpret_cast<float*>(smem_raw + (sLD - SmemAddr(smem_raw)));
  float* Dl = Ls + kQBuf * kBr;
  const uint32_t bars = sLD + 2 * kQBuf * kBr * 4;
  const uint32_t barKV = bars;
  auto full = [&](int s) { return bars + 8u * (1 + s); };
  auto empty = [&](int s) { return bars + 8u * (1 + kQBuf + s); };

  const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  // p.lpt: grid (H·B, key tiles), key tile 0 (the most query tiles when causal) of every head first
  const int n0 = (p.lpt ? static_cast<int>(blockIdx.y) : static_cast<int>(blockIdx.x)) * kBc;
  const int h = p.lpt ? static_cast<int>(blockIdx.x) % p.H : static_cast<int>(blockIdx.y);
  const int b = p.lpt ? static_cast<int>(blockIdx.x) / p.H : static_cast<int>(blockIdx.z);
  const int64_t bh = static_cast<int64_t>(b) * p.H + h;
  const int n_q_tiles = (p.Sq + kBr - 1) / kBr;
  const int i_begin = p.causal ? min(n_q_tiles, n0 / kBr) : 0;

  if (tid == 0) {
    MbarInit(barKV, 1);
#pragma unroll
    for (int s = 0; s < kQBuf; ++s) {
      MbarInit(full(s), 1 + 32);  // the TMA thread's expect_tx + the warp's cp.async arrivals
      MbarInit(empty(s), 8);      // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wgi == 0) {  // producer
    SetMaxNRegDec<24>();
    if (warp == 0) {
      const float* lg = p.lse + bh * p.Sq;
      const float* dg = p.delta + bh * p.Sq;
      if (lane == 0) {
        MbarExpectTx(barKV, 2 * kKBytes);
        TmaLoad4d(sK, &tk, barKV, 0, n0, h, b);
        TmaLoad4d(sV, &tv, barKV, 0, n0, h, b);
      }
      for (int it = i_begin; it < n_q_tiles; ++it) {
        const int u = it - i_begin, st = u % kQBuf, m0 = it * kBr;
        if (u >= kQBuf) MbarWait(empty(st), ((u / kQBuf) & 1) ^ 1);
        if (lane == 0) {
          MbarExpectTx(full(st), 2 * kQBytes);
          TmaLoad4d(sQ + st * kQBytes, &tq, full(st), 0, m0, h, b);
          TmaLoad4d(sdO + st * kQBytes, &tdo, full(st), 0, m0, h, b);
        }
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int r = lane + 32 * e;
          const bool valid = m0 + r < p.Sq;
          CpAsync4(SmemAddr(Ls + st * kBr + r), valid ? lg + m0 + r : lg, valid);
          CpAsync4(SmemAddr(Dl + st * kBr + r), valid ? dg + m0 + r : dg, valid);
        }
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(full(st))
                     : "memory");
      }
    }
    return;
  }

  SetMaxNRegInc<240>();
  const int cw = wgi - 1;
  const bool leader = (tid % 128) == 0;
  float* dqa = p.dq_accum + bh * p.Sq * D;

  float dk[D / 2], dv[D / 2], dq[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = dq[i] = 0.f;
  uint32_t pa[kBr / 16][4], da[kBr / 16][4];
#pragma unroll
  for (int ks = 0; ks < kBr / 16; ++ks)
    pa[ks][0] = pa[ks][1] = pa[ks][2] = pa[ks][3] = da[ks][0] = da[ks][1] = da[ks][2] = da[ks][3] =
        0u;
  const int key_lo = n0 + cw * 64 + warp * 16 + lane / 4;
  const int key_row_l = cw * 64 + warp * 16 + lane / 4;  // row in the CTA's key tile
  const float sl2 = p.scale_log2;
  const uint32_t sKw = sK + cw * 64 * 128, sVw = sV + cw * 64 * 128;
  const uint32_t sdQw = sdQ + cw * 2 * kdQBytes;

  auto dq_stage = [&](uint32_t slot) {
    const int r_lo = warp * 16 + lane / 4;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const int col = i * 8 + (lane % 4) * 2;
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(slot + (r_lo * D + col) * 4),
                   "f"(dq[4 * i]), "f"(dq[4 * i + 1])
                   : "memory");
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(slot + ((r_lo + 8) * D + col) * 4),
                   "f"(dq[4 * i + 2]), "f"(dq[4 * i + 3])
                   : "memory");
    }
  };
  auto dq_reduce = [&](uint32_t slot, int m0) {  // the leader, after the warpgroup's barrier
    const uint32_t bytes = static_cast<uint32_t>(min(kBr, p.Sq - m0)) * D * 4;
    asm volatile(
        "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
            dqa + static_cast<int64_t>(m0) * D),
        "r"(slot), "r"(bytes)
        : "memory");
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
  };
  auto wg_barrier = [&]() { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + cw) : "memory"); };

  MbarWait(barKV, 0);
  // kSched: FA3's scheduler barrier (named barriers 3 and 4): the two
  // warpgroups take turns from their dV/dK issue to their next Sᵀ/dPᵀ issue
  // (or dQ issue), so one warpgroup's elementwise work overlaps the other's GEMMs.
  const int n_it = n_q_tiles - i_begin;
  auto sched_sync = [&]() {
    if (kSched) asm volatile("bar.sync %0, 256;\n" ::"r"(3 + cw) : "memory");
  };
  auto sched_arrive = [&](bool last) {
    if (kSched && !(last && cw == 1))
      asm volatile("bar.arrive %0, 256;\n" ::"r"(3 + (cw ^ 1)) : "memory");
  };
  if (kSched && cw == 1 && n_it > 0) asm volatile("bar.arrive 3, 256;\n" ::: "memory");
  if constexpr (!kPipe) {
    // kKReg: this warpgroup's 64 keys of K as the register A operand of Sᵀ = K Qᵀ
    // (loaded once by ldmatrix: 8 KB less shared-memory operand traffic per tile)
    uint32_t ka[D / 16][4];
    if constexpr (kKReg) {
      const int row = cw * 64 + warp * 16 + lane % 16;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        Ldsm4(sK + row * 128 + (((2 * kk + lane / 16) ^ (row % 8)) << 4), ka[kk]);
    }
    for (int it = i_begin; it < n_q_tiles; ++it) {
      const int u = it - i_begin, st = u % kQBuf, m0 = it * kBr;
      MbarWait(full(st), (u / kQBuf) & 1);
      const uint32_t sQb = sQ + st * kQBytes, sdOb = sdO + st * kQBytes;
      const uint32_t sdSb = sdS + (u & 1) * kSBytes;
      const float* Lb = Ls + st * kBr;
      const float* Db = Dl + st * kBr;

      float stt[kBr / 2], dpt[kBr / 2];
      wg::Fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        if constexpr (kKReg)
          wg::Mma<T, kBr>::template RS<0>(stt, ka[kk], wg::Desc(sQb + kk * 32, 16, 1024),
                                          kk > 0 ? 1 : 0);
        else
          wg::Mma<T, kBr>::template SS<0, 0>(stt, wg::Desc(sKw + kk * 32, 16, 1024),
                                             wg::Desc(sQb + kk * 32, 16, 1024), kk > 0 ? 1 : 0);
      }
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        wg::Mma<T, kBr>::template SS<0, 0>(dpt, wg::Desc(sVw + kk * 32, 16, 1024),
                                           wg::Desc(sdOb + kk * 32, 16, 1024), kk > 0 ? 1 : 0);
      wg::Commit();
      if (u > 0) sched_arrive(false);  // the turn began before tile it-1's dV/dK
      wg::Wait<0>();
      wg::FenceRegs(stt);
      wg::FenceRegs(dpt);
      wg::FenceRegs(dq);
      wg::FenceRegs(dv);
      wg::FenceRegs(dk);
      wg::FenceRegs(pa);
      wg::FenceRegs(da);
      // tile it-1's dV, dK (its Q, dO) and dQ are complete
      if (u > 0 && lane == 0) MbarArrive(empty((u - 1) % kQBuf));
      const uint32_t dq_slot = sdQw + (u & 1) * kdQBytes;
      if (u > 0) dq_stage(dq_slot);  // tile it-1's dQ

      const bool need_mask =
          (m0 + kBr > p.Sq) || (n0 + kBc > p.Sk) || (p.causal && n0 + kBc - 1 > m0);
#pragma unroll
      for (int i = 0; i < kBr / 8; ++i) {
        const int col = i * 8 + (lane % 4) * 2;
        const float2 lv = *reinterpret_cast<const float2*>(Lb + col);
        const float2 dd = *reinterpret_cast<const float2*>(Db + col);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float l = (e & 1) ? lv.y : lv.x;
          const float dl = (e & 1) ? dd.y : dd.x;
          float pv = Ex2(fmaf(stt[4 * i + e], sl2, -l * kLog2e));
          if (need_mask) {
            const int q = m0 + col + (e & 1);
            const int key = key_lo + (e >> 1) * 8;
            if (q >= p.Sq || key >= p.Sk || (p.causal && key > q)) pv = 0.f;
          }
          stt[4 * i + e] = pv;
          dpt[4 * i + e] = pv * (dpt[4 * i + e] - dl);
        }
      }
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks) {
        PackA<T>(stt + 8 * ks, pa[ks]);
        PackA<T>(dpt + 8 * ks, da[ks]);
      }
      sched_sync();
      wg::Fence();
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks)
        wg::Mma<T, D>::template RS<1>(dv, pa[ks], wg::Desc(sdOb + ks * 16 * 128, kBr * 128, 1024),
                                      1);
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks)
        wg::Mma<T, D>::template RS<1>(dk, da[ks], wg::Desc(sQb + ks * 16 * 128, kBr * 128, 1024),
                                      1);
      wg::Commit();
      // dSᵀ of this warpgroup's 64 keys [keys][64 queries] (swizzled 128-byte rows)
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks)
#pragma unroll
        for (int c = 0; c < 2; ++c)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = key_row_l + r * 8;
            const int chunk = 2 * ks + c;
            StShared32(sdSb + row * 128 + ((chunk ^ (row % 8)) << 4) + (lane % 4) * 4,
                       da[ks][2 * c + r]);
          }
      wg::FenceProxyAsync();
      // the slot written next iteration was last read by the reduction issued
      // in the previous iteration
      if (leader) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      wg_barrier();
      if (leader && u > 0) dq_reduce(dq_slot, m0 - kBr);
      wg::Fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wg::Mma<T, D>::template SS<1, 1>(dq, wg::Desc(sdSb + (cw * 64 + ks * 16) * 128, 8192, 1024),
                                         wg::Desc(sK + (cw * 64 + ks * 16) * 128, kBc * 128, 1024),
                                         ks > 0 ? 1 : 0);
      wg::Commit();
      if (it + 1 == n_q_tiles) sched_arrive(true);
    }
  } else {
    // Pipelined across query tiles: tile u+1's Sᵀ/dPᵀ and tile u's dQ are issued
    // together at the end of iteration u, so the elementwise work of tile u+1
    // runs while dQ_u is on the tensor cores (wgmma groups in flight at the top
    // of iteration u: [dV,dK]_{u-1}, [Sᵀ,dPᵀ]_u, dQ_{u-1}; wait_group 1 leaves
    // only dQ_{u-1}). NB ptxas serialises this loop's wgmma (C7514: it does not
    // track the wgmma groups carried over the back edge), so it is kept as a
    // variant only.
    float stt[kBr / 2], dpt[kBr / 2];
    auto issue_sdp = [&](int u) {
      const int st = u % kQBuf;
      MbarWait(full(st), (u / kQBuf) & 1);
      const uint32_t sQb = sQ + st * kQBytes, sdOb = sdO + st * kQBytes;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        wg::Mma<T, kBr>::template SS<0, 0>(stt, wg::Desc(sKw + kk * 32, 16, 1024),
                                           wg::Desc(sQb + kk * 32, 16, 1024), kk > 0 ? 1 : 0);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        wg::Mma<T, kBr>::template SS<0, 0>(dpt, wg::Desc(sVw + kk * 32, 16, 1024),
                                           wg::Desc(sdOb + kk * 32, 16, 1024), kk > 0 ? 1 : 0);
      wg::Commit();
    };
    // pin the zero-initialised accumulators before the first wgmma: a zero
    // moved past it would redefine accumulator registers inside an open wgmma
    // stage (ptxas then serialises every wgmma, C7515)
    wg::FenceRegs(dq);
    wg::FenceRegs(dv);
    wg::FenceRegs(dk);
    wg::FenceRegs(pa);
    wg::FenceRegs(da);
    if (n_it > 0) {
      wg::Fence();
      issue_sdp(0);
      wg::Commit();  // an empty group in dQ_{-1}'s place: the loop always waits with wait_group 1
    }
    for (int u = 0; u < n_it; ++u) {
      const int it = i_begin + u, st = u % kQBuf, m0 = it * kBr;
      const uint32_t sQb = sQ + st * kQBytes, sdOb = sdO + st * kQBytes;
      const uint32_t sdSb = sdS + (u & 1) * kSBytes;
      const float* Lb = Ls + st * kBr;
      const float* Db = Dl + st * kBr;
      wg::Wait<1>();
      wg::FenceRegs(stt);
      wg::FenceRegs(dpt);
      wg::FenceRegs(dv);
      wg::FenceRegs(dk);
      wg::FenceRegs(pa);
      wg::FenceRegs(da);
      // tile u-1's dV, dK (its Q, dO) are complete
      if (u > 0 && lane == 0) MbarArrive(empty((u - 1) % kQBuf));

      const bool need_mask =
          (m0 + kBr > p.Sq) || (n0 + kBc > p.Sk) || (p.causal && n0 + kBc - 1 > m0);
      // P and dS into new registers, packed straight into the A fragments (the
      // Sᵀ/dPᵀ accumulators are not redefined while dQ is in flight, so ptxas
      // need not serialise the wgmma pipeline)
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks) {
        float pl[8], dsl[8];
#pragma unroll
        for (int ii = 0; ii < 2; ++ii) {
          const int i = 2 * ks + ii;
          const int col = i * 8 + (lane % 4) * 2;
          const float2 lv = *reinterpret_cast<const float2*>(Lb + col);
          const float2 dd = *reinterpret_cast<const float2*>(Db + col);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float l = (e & 1) ? lv.y : lv.x;
            const float dl = (e & 1) ? dd.y : dd.x;
            float pv = Ex2(fmaf(stt[4 * i + e], sl2, -l * kLog2e));
            if (need_mask) {
              const int q = m0 + col + (e & 1);
              const int key = key_lo + (e >> 1) * 8;
              if (q >= p.Sq || key >= p.Sk || (p.causal && key > q)) pv = 0.f;
            }
            pl[4 * ii + e] = pv;
            dsl[4 * ii + e] = pv * (dpt[4 * i + e] - dl);
          }
        }
        PackA<T>(pl, pa[ks]);
        PackA<T>(dsl, da[ks]);
      }
      sched_sync();
      wg::Fence();
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks)
        wg::Mma<T, D>::template RS<1>(dv, pa[ks], wg::Desc(sdOb + ks * 16 * 128, kBr * 128, 1024),
                                      1);
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks)
        wg::Mma<T, D>::template RS<1>(dk, da[ks], wg::Desc(sQb + ks * 16 * 128, kBr * 128, 1024),
                                      1);
      wg::Commit();
      const uint32_t dq_slot = sdQw + (u & 1) * kdQBytes;
      // dQ_{u-1} is complete (only [dV,dK]_u may still be in flight); the wait
      // is unconditional so that ptxas sees dq retired on every path (C7514)
      wg::Wait<1>();
      wg::FenceRegs(dq);
      if (u > 0) dq_stage(dq_slot);
        // dSᵀ of this warpgroup's 64 keys [keys][64 queries] (swizzled 128-byte rows)
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks)
#pragma unroll
        for (int c = 0; c < 2; ++c)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = key_row_l + r * 8;
            const int chunk = 2 * ks + c;
            StShared32(sdSb + row * 128 + ((chunk ^ (row % 8)) << 4) + (lane % 4) * 4,
                       da[ks][2 * c + r]);
          }
      wg::FenceProxyAsync();
      // the slot staged next iteration was last read by the reduction issued in
      // the previous iteration
      if (leader) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      wg_barrier();
      if (leader && u > 0) dq_reduce(dq_slot, m0 - kBr);
      wg::FenceRegs(stt);
      wg::FenceRegs(dpt);
      wg::FenceRegs(dq);
      wg::Fence();
      if (u + 1 < n_it) issue_sdp(u + 1);
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wg::Mma<T, D>::template SS<1, 1>(dq, wg::Desc(sdSb + (cw * 64 + ks * 16) * 128, 8192, 1024),
                                         wg::Desc(sK + (cw * 64 + ks * 16) * 128, kBc * 128, 1024),
                                         ks > 0 ? 1 : 0);
      wg::Commit();
      sched_arrive(u + 1 == n_it);
    }
  }
  wg::Wait<0>();
  wg::FenceRegs(dq);
  wg::FenceRegs(dv);
  wg::FenceRegs(dk);
  wg::FenceRegs(pa);
  wg::FenceRegs(da);
  if (i_begin < n_q_tiles) {
    const uint32_t dq_slot = sdQw + ((n_q_tiles - i_begin) & 1) * kdQBytes;
    dq_stage(dq_slot);
    wg::FenceProxyAsync();
    if (leader) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
    wg_barrier();
    if (leader) {
      dq_reduce(dq_slot, (n_q_tiles - 1) * kBr);
      asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    }
  }

  T* dkg = static_cast<T*>(p.dk) + b * p.sdk.b + h * p.sdk.h;
  T* dvg = static_cast<T*>(p.dv) + b * p.sdv.b + h * p.sdv.h;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = key_lo + r * 8;
    if (key < p.Sk) {
      T* dkr = dkg + static_cast<int64_t>(key) * p.sdk.s + (lane % 4) * 2;
      T* dvr = dvg + static_cast<int64_t>(key) * p.sdv.s + (lane % 4) * 2;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        *reinterpret_cast<uint32_t*>(dkr + i * 8) =
            Tc<T>::Pack(dk[4 * i + 2 * r] * p.scale, dk[4 * i + 2 * r + 1] * p.scale);
        *reinterpret_cast<uint32_t*>(dvr + i * 8) =
            Tc<T>::Pack(dv[4 * i + 2 * r], dv[4 * i + 2 * r + 1]);
      }
    }
  }
#endif
}

template <typename T, int D, bool kPipe, bool kSched, bool kKReg>
const char* LaunchBwdWs(const Params& p_in, bool lpt, cudaStream_t stream) {
  Params p = p_in;
  p.lpt = lpt;
  CUtensorMap tq, tk, tv, tdo;
  if (!MakeTensorMap<T>(&tq, p.q, p.sq, p, p.Sq, 64) ||
      !MakeTensorMap<T>(&tk, p.k, p.sk, p, p.Sk, 128) ||
      !MakeTensorMap<T>(&tv, p.v, p.sv, p, p.Sk, 128) ||
      !MakeTensorMap<T>(&tdo, p.dout, p.sdo, p, p.Sq, 64))
    return LaunchBwd<T, D>(p, stream);
  // K, V; Q and dO × 3; dSᵀ × 2; dQ staging 2 × 2 (float32); L and D × 3; barriers; alignment
  constexpr size_t smem =
      (2 * 128 * D + 6 * 64 * D + 2 * 128 * 64) * 2 + 4 * 64 * D * 4 + 6 * 64 * 4 + 8 * 7 + 1024;
  auto kernel = BwdWsKernel<T, D, kPipe, kSched, kKReg>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  const unsigned n_blk = (p.Sk + 127) / 128;
  const dim3 grid = p.lpt ? dim3(p.H * p.B, n_blk, 1) : dim3(n_blk, p.H, p.B);
  kernel<<<grid, 384, smem, stream>>>(p, tq, tk, tv, tdo);
  err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

// The pair (L or D) of columns 8i + 2t, 8i + 2t + 1 (t = lane % 4) of a
// 128-query step: plain order, or kPerm's (column 8i + 2t + e at
// 16(i / 2) + 4t + 2(i % 2) + e: the four lanes of a quad read 64 contiguous
// bytes), where i and i + 1 share one 16-byte load (the compiler merges the two).
template <bool kPerm>
__device__ __forceinline__ float2 LdPair(const float* base, int i, int lane) {
  if constexpr (kPerm) {
    const float4 v = *reinterpret_cast<const float4*>(base + (i / 2) * 16 + (lane % 4) * 4);
    return (i % 2) ? make_float2(v.z, v.w) : make_float2(v.x, v.y);
  } else {
    return *reinterpret_cast<const float2*>(base + i * 8 + (lane % 4) * 2);
  }
}

// ---------------------------------------------------------------------------
// Warp-specialised backward, head dim 64, FlashAttention-3's d64 tiling
// (hopper/flash_bwd_launch_template.h: kBlockM = kBlockN = 128, SdP_swapAB,
// dK/dV as RS, dQ as SS, 2 consumer warpgroups). One CTA per 128-key tile;
// the loop runs over 128-query tiles (Q, dO, L, D in a 2-deep ring). Per
// tile, warpgroup w (64 keys): Sᵀ = K_w Qᵀ and dPᵀ = V_w dOᵀ as m64n128 SS
// (K_w, V_w read once per 128 queries instead of per 64), P under dPᵀ, dSᵀ of
// its keys to shared memory (both 64-query column blocks), dV += Pᵀ dO (RS);
// one 256-thread named barrier (both warpgroups' dSᵀ written); dQ of query
// half w over all 128 keys (M 64, N 64, K 128, SS: A = dS MN-major, B = K
// MN-major) and dK += dSᵀ Q (RS); dQ staged as float32 and added by one
// 16 KB cp.reduce.async.bulk per warpgroup and tile: 32 KB of reductions per
// 128×128 tile instead of run 9's 64 KB. Nothing is carried in flight over the
// loop's back edge (wait_group 0 at the end of each tile).
// kOpt (run 14): the unmasked tiles run a P loop without mask code; dSᵀ stored
// by stmatrix (8 instead of 32 stores per thread); dQ staged in TMA's 128-byte
// swizzle (the plain row-major staging was an 8-way bank conflict per store)
// and added by cp.reduce.async.bulk.tensor over a float32 tensor map of the
// accumulator (tdq). kDkFirst: dK issued before the barrier, next to dV.
// kEarlyDv: dV issued as soon as P is packed, before waiting for dPᵀ, so that
// it runs under the dS elementwise work and the dSᵀ stores; P's float32 copy
// then dies at once (it did not fit beside the packed one: 124 bytes of
// spills), so dS = P·(dP − D) is formed in bf16x2/f16x2 from the packed P and
// the packed (dP − D): two more roundings than the float32 product.
// kFlags (run 18): bit 0 (kLdPerm) L and D stored in shared memory permuted
// (LdPair) so that a thread's values come by 8 LDS.128 instead of 16 LDS.64
// each; bit 1 (kRedDq) dQ added from the registers by red.global.add.v2.f32
// instead of the swizzled staging, the 128-thread barrier and the bulk tensor
// reduction (64 KB less shared-memory traffic per step; the reductions go
// through the LSU to L2 instead). Run 18's source-level profile of variant 13:
// the dQ staging stores were a 2-way bank conflict (a 64-bit store is served
// by half-warps, and the 4 rows of a half-warp met only 2 distinct 32-byte
// chunk pairs of the 128-byte swizzle) and the staging + barrier + reduction
// took 16 % of the warps' time; bit 2 (kSwapDq) lets the odd quads of a warp
// store block i ^ 2 where the even ones store block i, so each half-warp
// covers all 32 banks; bit 3 (kWarpRed) each warp adds its own 16 rows by two
// bulk tensor reductions (box [16 rows][32 floats]) after a __syncwarp
// instead of a 128-thread barrier and one reduction per warpgroup; bit 4
// (kEarlyDv2) dV is issued as soon as P is packed, before the dPᵀ wait, so it
// runs under the dS work (the profile: 14 % of the time, tensor pipe idle),
// and dS = P·(dP − D) is formed in float32 from the packed P (unpacked, the
// same P the dV product uses), so that P's float32 copy dies at the pack.
template <typename T, int D, bool kOpt, bool kDkFirst, bool kEarlyDv = false, int kEmu = 0,
          int kFlags = 0>
__global__ void __launch_bounds__(384, 1)
    BwdWs128Kernel(const Params p, const __grid_constant__ CUtensorMap tq,
                   const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv,
                   const __grid_constant__ CUtensorMap tdo,
                   const __grid_constant__ CUtensorMap tdq) {
#ifdef BENCHD_FLASH_WGMMA
  static_assert(D == 64, "head dim 64 only");
  constexpr bool kLdPerm = (kFlags & 1) != 0, kRedDq = (kFlags & 2) != 0;
  constexpr bool kSwapDq = (kFlags & 4) != 0, kWarpRed = (kFlags & 8) != 0;
  constexpr bool kEarlyDv2 = (kFlags & 16) != 0;
  constexpr bool kOwnDq = (kFlags & 32) != 0, kSkew = (kFlags & 64) != 0;
  constexpr bool kWriter = (kFlags & 128) != 0, kDeferDq = (kFlags & 256) != 0;
  static_assert(!kOwnDq || (kOpt && !kDkFirst && !kRedDq && !kWarpRed), "kOwnDq: kOpt's staging");
  static_assert(!kWriter || (kOpt && !kDkFirst && !kRedDq && !kWarpRed && !kOwnDq && !kSkew),
                "kWriter: kOpt's staging, one reduction per warpgroup");
  static_assert(!kDeferDq || kWriter, "kDeferDq needs the writer warp");
  constexpr bool kDqPerm = (kFlags & 512) != 0;
  static_assert(!kDqPerm || kWriter, "kDqPerm needs the writer warp");
  // kDq2 (run 24): one dSᵀ stage instead of two (each warpgroup stores its dSᵀ of step u + 1
  // only once the other one's dQ of step u is complete: named barriers 9, 10) and two dQ
  // staging slots per warpgroup instead of one (the same shared memory), so that a slot is
  // rewritten two steps after its reduction was issued instead of one (run 23's profile: the
  // consumers waited 4 % of the time for the writer to free the slot). kLateCommit: the
  // writer is told about the dQ tile of step u only after step u + 1's dSᵀ fence, which then
  // also covers the dQ stores: no fence of its own.
  constexpr bool kDq2 = (kFlags & 1024) != 0, kLateCommit = (kFlags & 2048) != 0;
  static_assert(!kDq2 || (kWriter && !kDeferDq), "kDq2: the writer, no deferral");
  static_assert(!kLateCommit || kDq2, "kLateCommit needs kDq2's second slot");
  // kEarlyFree (run 25): with kLateCommit the writer frees a slot only after the next tile's
  // late commit (mid next step), a step after the slot's reduction was issued: the consumers
  // still waited for it (run 24's profile: 3.4 %). Here the writer waits for its own
  // reductions' reads at once and frees the slot for the tile two steps later; the full and
  // empty barriers come in pairs by slot parity (full 11 + 2w + p, empty 5 + 2w + p), so that
  // no barrier ever gets a second phase's arrivals before its first completes.
  constexpr bool kEarlyFree = (kFlags & 4096) != 0;
  static_assert(!kEarlyFree || kLateCommit, "kEarlyFree: kLateCommit's protocol");
  static_assert(!(kEarlyDv2 && kEarlyDv), "one early-dV form");
  static_assert(!(kWarpRed && kRedDq), "one dQ reduction");
  constexpr int kBc = 128, kBr = 128, kQBuf = 2;
  constexpr uint32_t kKBytes = kBc * D * 2, kQBytes = kBr * D * 2;
  constexpr uint32_t kSBytes =
      kBc * kBr * 2;                     // dSᵀ [128 keys][128 queries]: 2 blocks of 64 queries
  constexpr uint32_t kSBlk = kBc * 128;  // one 64-query column block (128-byte rows)
  constexpr uint32_t kdQBytes = 64 * D * 4;  // one warpgroup's [64][64] float32 dQ tile
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (SmemAddr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sK = base, sV = sK + kKBytes, sQ = sV + kKBytes, sdO = sQ + kQBuf * kQBytes,
                 sdS = sdO + kQBuf * kQBytes, sdQ = sdS + (kOwnDq || kDq2 ? 1 : 2) * kSBytes;
  const uint32_t sLD = sdQ + (kOwnDq || kDq2 ? 4 : 2) * kdQBytes;  // L, D: kQBuf × 128 floats
  float* Ls = reinterpret_cast<float*>(smem_raw + (sLD - SmemAddr(smem_raw)));
  float* Dl = Ls + kQBuf * kBr;
  const uint32_t bars = sLD + 2 * kQBuf * kBr * 4;
  const uint32_t barKV = bars;
  auto full = [&](int s) { return bars + 8u * (1 + s); };
  auto empty = [&](int s) { return bars + 8u * (1 + kQBuf + s); };

  const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int n0 = static_cast<int>(blockIdx.x) * kBc;
  const int h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = static_cast<int64_t>(b) * p.H + h;
  const int n_q_tiles = (p.Sq + kBr - 1) / kBr;
  const int i_begin = p.causal ? min(n_q_tiles, n0 / kBr) : 0;

  if (tid == 0) {
    MbarInit(barKV, 1);
#pragma unroll
    for (int s = 0; s < kQBuf; ++s) {
      MbarInit(full(s), 1 + 32);  // the TMA thread's expect_tx + the warp's cp.async arrivals
      MbarInit(empty(s), 8);      // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wgi == 0) {  // producer
    SetMaxNRegDec<24>();
    if (warp == 0) {
      const float* lg = p.lse + bh * p.Sq;
      const float* dg = p.delta + bh * p.Sq;
      if (lane == 0) {
        MbarExpectTx(barKV, 2 * kKBytes);
        TmaLoad4d(sK, &tk, barKV, 0, n0, h, b);
        TmaLoad4d(sV, &tv, barKV, 0, n0, h, b);
      }
      auto load_tile = [&](int it) {
        const int u = it - i_begin, st = u % kQBuf, m0 = it * kBr;
        if (u >= kQBuf) MbarWait(empty(st), ((u / kQBuf) & 1) ^ 1);
        if (lane == 0) {
          MbarExpectTx(full(st), 2 * kQBytes);
          TmaLoad4d(sQ + st * kQBytes, &tq, full(st), 0, m0, h, b);
          TmaLoad4d(sdO + st * kQBytes, &tdo, full(st), 0, m0, h, b);
        }
#pragma unroll
        for (int e = 0; e < kBr / 32; ++e) {
          const int r = lane + 32 * e;
          const int rp =
              kLdPerm ? 16 * (r / 16) + 4 * ((r % 8) / 2) + 2 * ((r / 8) % 2) + r % 2 : r;
          const bool valid = m0 + r < p.Sq;
          CpAsync4(SmemAddr(Ls + st * kBr + rp), valid ? lg + m0 + r : lg, valid);
          CpAsync4(SmemAddr(Dl + st * kBr + rp), valid ? dg + m0 + r : dg, valid);
        }
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(full(st))
                     : "memory");
      };
      if constexpr (kWriter) {
        // not unrolled: unrolled (by two, as ptxas does otherwise) this loop spilled at 24
        // registers beside the writer's code
#pragma unroll 1
        for (int it = i_begin; it < n_q_tiles; ++it) load_tile(it);
      } else {
        for (int it = i_begin; it < n_q_tiles; ++it) load_tile(it);
      }
    } else if (kWriter && warp == 1) {
      // kWriter (run 22): the dQ writer warp (FlashAttention-3's store_dq). Per step and
      // consumer warpgroup w: wait until w has staged its dQ tile (named barrier 5 + w, 128
      // arrivals of w + this warp's 32), add it by two bulk tensor reductions, and once
      // the copy engine has read the staging slot, free it (barrier 7 + w) for w's next tile.
      // kDeferDq: staging v holds dQ of step v − 1 (staging 0 is not added), one more staging
      const int n_stage = n_q_tiles - i_begin + (kDeferDq && i_begin < n_q_tiles ? 1 : 0);
      for (int v = 0; v < n_stage; ++v) {
        const int m0 = (i_begin + v - (kDeferDq ? 1 : 0)) * kBr;
        const bool add = !kDeferDq || v > 0;
#pragma unroll
        for (int w = 0; w < 2; ++w) {
          asm volatile("bar.sync %0, 160;\n" ::"r"(kEarlyFree ? 11 + 2 * w + (v & 1) : 5 + w)
                       : "memory");
          if (lane == 0) {
            if constexpr (kDqPerm) {
              // kDqPerm: the 16 KB slot as it is, into the permuted accumulator (Sq % 128 == 0)
              if (add && m0 + w * 64 < p.Sq)
                asm volatile(
                    "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], "
                    "%2;\n" ::"l"(p.dq_accum +
                                  ((bh * n_q_tiles + m0 / kBr) * 2 + w) * (kdQBytes / 4)),
                    "r"(sdQ + (kDq2 ? 2 * w + (v & 1) : w) * kdQBytes), "r"(kdQBytes)
                    : "memory");
            } else if (add && m0 + w * 64 < p.Sq)
#pragma unroll
              for (int j = 0; j < D / 32; ++j)
                asm volatile(
                    "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group"
                    " [%0, {%1, %2, %3}], [%4];\n" ::"l"(reinterpret_cast<uint64_t>(&tdq)),
                    "r"(32 * j), "r"(m0 + w * 64), "r"(static_cast<int>(bh)),
                    "r"(sdQ + (kDq2 ? 2 * w + (v & 1) : w) * kdQBytes + j * 8192)
                    : "memory");
            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
          }
        }
        if constexpr (kEarlyFree) {  // both slots of staging v are free for staging v + 2
          if (lane == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
          __syncwarp();
          if (v + 2 < n_stage) {
            asm volatile("bar.arrive %0, 160;\n" ::"r"(5 + (v & 1)) : "memory");
            asm volatile("bar.arrive %0, 160;\n" ::"r"(7 + (v & 1)) : "memory");
          }
        } else if (kDq2 && v + 1 < n_stage) {
          // kDq2: free the slots of staging v − 1 (the consumers' next tile goes there); after
          // staging 0 a handshake only (it keeps the consumers' arrivals for staging v + 1
          // behind this warp's wait for staging v on barriers 5, 6)
          if (lane == 0 && v > 0) asm volatile("cp.async.bulk.wait_group.read 3;\n" ::: "memory");
          __syncwarp();
          asm volatile("bar.arrive 7, 160;\n" ::: "memory");
          if (lane == 0 && v > 0) asm volatile("cp.async.bulk.wait_group.read 2;\n" ::: "memory");
          __syncwarp();
          asm volatile("bar.arrive 8, 160;\n" ::: "memory");
        } else if (!kDq2 &&
                   v + 1 < n_stage) {  // the consumers wait for slot w only before a next tile
          if (lane == 0) asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory");
          __syncwarp();
          asm volatile("bar.arrive 7, 160;\n" ::: "memory");
          if (lane == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
          __syncwarp();
          asm volatile("bar.arrive 8, 160;\n" ::: "memory");
        }
      }
      if (lane == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    }
    return;
  }

  SetMaxNRegInc<240>();
  const int cw = wgi - 1;
  const bool leader = (tid % 128) == 0;
  float* dqa = p.dq_accum + bh * p.Sq * D;

  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.f;
  const int key_lo = n0 + cw * 64 + warp * 16 + lane / 4;
  const int key_row_l = cw * 64 + warp * 16 + lane / 4;  // row in the CTA's key tile
  const float sl2 = p.scale_log2;
  const uint32_t sKw = sK + cw * 64 * 128, sVw = sV + cw * 64 * 128;
  const uint32_t sdQw = sdQ + cw * (kOwnDq || kDq2 ? 2 : 1) * kdQBytes;

  // kWriter: this warpgroup's dQ tile goes to its staging slot (float32, TMA's 128-byte
  // swizzle as kOpt's staging below; kSwapDq's conflict-free order) for the writer warp:
  // stage_store waits (sync_empty) until the writer has read the slot's previous tile
  // (barrier 7 + cw) and stores; stage_commit fences and arrives on barrier 5 + cw without
  // waiting. kDeferDq keeps dQ of step u in dqk and stores it in step u + 1 between the Sᵀ and
  // the dPᵀ issue, while the tensor pipe runs Sᵀ (stt in flight, dpt not yet live: the
  // registers fit); every step stores (step 0 an unused tile the writer skips), so that no
  // divergent path reads the registers the dQ wgmma wrote (ptxas serialised every wgmma:
  // C7518).
  [[maybe_unused]] auto stage_store = [&](const float(&dq)[D / 2], bool sync_empty, uint32_t sdQw) {
    if (sync_empty) {  // immediate barrier ids (a register for 7 + cw was spilled)
      if (cw == 0)
        asm volatile("bar.sync 7, 160;\n" ::: "memory");
      else
        asm volatile("bar.sync 8, 160;\n" ::: "memory");
    }
    if constexpr (kDqPerm) {
      // kDqPerm (FlashAttention-3's dQ layout): the thread's 32 values as they are, 16 bytes
      // at a time, thread-contiguous (8 conflict-free STS.128); DqConvertPermKernel undoes it
#pragma unroll
      for (int i = 0; i < D / 8; ++i)
        asm volatile(
            "st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(sdQw + (i * 128 + tid % 128) * 16),
            "f"(dq[4 * i]), "f"(dq[4 * i + 1]), "f"(dq[4 * i + 2]), "f"(dq[4 * i + 3])
            : "memory");
      return;
    }
    const int r_lo = warp * 16 + lane / 4;
    const bool odd = kSwapDq && ((lane / 4) & 1) != 0;
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = r_lo + 8 * r;
        const int ii = odd ? (i ^ 2) : i;
        const int chunk = 2 * (ii % 4) + (lane % 4) / 2;
        const float a = odd ? dq[4 * (i ^ 2) + 2 * r] : dq[4 * i + 2 * r];
        const float c = odd ? dq[4 * (i ^ 2) + 2 * r + 1] : dq[4 * i + 2 * r + 1];
        asm volatile(
            "st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(sdQw + (i / 4) * 8192 + row * 128 +
                                                       ((chunk ^ (row % 8)) << 4) + (lane % 2) * 8),
            "f"(a), "f"(c)
            : "memory");
      }
  };
  [[maybe_unused]] auto stage_commit = [&]() {
    wg::FenceProxyAsync();
    if (cw == 0)
      asm volatile("bar.arrive 5, 160;\n" ::: "memory");
    else
      asm volatile("bar.arrive 6, 160;\n" ::: "memory");
  };
  [[maybe_unused]] float dqk[kDeferDq ? D / 2 : 1];
  if constexpr (kDeferDq) {
#pragma unroll
    for (int i = 0; i < D / 2; ++i) dqk[i] = 0.f;  // step 0 stores it; the writer skips it
  }

  MbarWait(barKV, 0);
  for (int it = i_begin; it < n_q_tiles; ++it) {
    const int u = it - i_begin, st = u % kQBuf, m0 = it * kBr;
    MbarWait(full(st), (u / kQBuf) & 1);
    // kSkew: warpgroup 1 starts its first step once warpgroup 0 has done its first P loop, so
    // that (with nothing else coupling them) one's exponentials run under the other's GEMMs
    if (kSkew && u == 0 && cw == 1) asm volatile("bar.sync 4, 256;\n" ::: "memory");
    const uint32_t sQb = sQ + st * kQBytes, sdOb = sdO + st * kQBytes;
    const uint32_t sdSb = sdS + (kOwnDq || kDq2 ? 0 : (u & 1)) * kSBytes;
    const float* Lb = Ls + st * kBr;
    const float* Db = Dl + st * kBr;

    float stt[kBr / 2], dpt[kBr / 2];
    wg::Fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wg::Mma<T, kBr>::template SS<0, 0>(stt, wg::Desc(sKw + kk * 32, 16, 1024),
                                         wg::Desc(sQb + kk * 32, 16, 1024), kk > 0 ? 1 : 0);
    wg::Commit();
    if constexpr (kDeferDq) {
      stage_store(dqk, u > 0, sdQw);  // the previous step's dQ, under Sᵀ
      wg::Fence();
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wg::Mma<T, kBr>::template SS<0, 0>(dpt, wg::Desc(sVw + kk * 32, 16, 1024),
                                         wg::Desc(sdOb + kk * 32, 16, 1024), kk > 0 ? 1 : 0);
    wg::Commit();
    if constexpr (kDeferDq) stage_commit();
    const bool need_mask =
        (m0 + kBr > p.Sq) || (n0 + kBc > p.Sk) || (p.causal && n0 + kBc - 1 > m0);
    wg::Wait<1>();
    wg::FenceRegs(stt);
    uint32_t pa[kBr / 16][4], da[kBr / 16][4];
    // P = exp2(Sᵀ·scale·log2e − L·log2e) (under dPᵀ), packed as the A operand of dV
    auto p_loop = [&](auto masked) {
      constexpr bool kMasked = decltype(masked)::value;
#pragma unroll
      for (int i = 0; i < kBr / 8; ++i) {
        const int col = i * 8 + (lane % 4) * 2;
        const float2 lv = LdPair<kLdPerm>(Lb, i, lane);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float l = (e & 1) ? lv.y : lv.x;
          float pv;
          if constexpr (kEmu > 0) {
            // every kEmu-th group of 4 scores on the FMA pipe, the rest on MUFU
            if (i % kEmu == kEmu - 1)
              pv = Ex2Poly(fmaf(stt[4 * i + e], sl2, -l * kLog2e));
            else
              pv = Ex2(fmaf(stt[4 * i + e], sl2, -l * kLog2e));
          } else {
            pv = Ex2(fmaf(stt[4 * i + e], sl2, -l * kLog2e));
          }
          if (kMasked && need_mask) {
            const int q = m0 + col + (e & 1);
            const int key = key_lo + (e >> 1) * 8;
            if (q >= p.Sq || key >= p.Sk || (p.causal && key > q)) pv = 0.f;
          }
          stt[4 * i + e] = pv;
        }
      }
    };
    if (!kOpt || need_mask)
      p_loop(std::true_type{});
    else
      p_loop(std::false_type{});
    if (kSkew && u == 0 && cw == 0) asm volatile("bar.arrive 4, 256;\n" ::: "memory");
#pragma unroll
    for (int ks = 0; ks < kBr / 16; ++ks) PackA<T>(stt + 8 * ks, pa[ks]);
    if constexpr (kEarlyDv2) {
      wg::Fence();
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks)
        wg::Mma<T, D>::template RS<1>(dv, pa[ks], wg::Desc(sdOb + ks * 16 * 128, kBr * 128, 1024),
                                      1);
      wg::Commit();
      wg::Wait<1>();  // dPᵀ is complete, dV may still run
      wg::FenceRegs(dpt);
#pragma unroll
      for (int i = 0; i < kBr / 8; ++i) {
        const float2 dd = LdPair<kLdPerm>(Db, i, lane);
#pragma unroll
        for (int h2 = 0; h2 < 2; ++h2) {
          const float2 pv = UnpackPair<T>(pa[i / 2][(i % 2) * 2 + h2]);
          dpt[4 * i + 2 * h2] = pv.x * (dpt[4 * i + 2 * h2] - dd.x);
          dpt[4 * i + 2 * h2 + 1] = pv.y * (dpt[4 * i + 2 * h2 + 1] - dd.y);
        }
      }
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks) PackA<T>(dpt + 8 * ks, da[ks]);
    } else if constexpr (kEarlyDv) {
      wg::Fence();
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks)
        wg::Mma<T, D>::template RS<1>(dv, pa[ks], wg::Desc(sdOb + ks * 16 * 128, kBr * 128, 1024),
                                      1);
      wg::Commit();
      wg::Wait<1>();  // dPᵀ is complete, dV may still run
      wg::FenceRegs(dpt);
#pragma unroll
      for (int i = 0; i < kBr / 8; ++i) {
        const float2 dd = LdPair<kLdPerm>(Db, i, lane);
#pragma unroll
        for (int e = 0; e < 4; ++e) dpt[4 * i + e] -= (e & 1) ? dd.y : dd.x;
      }
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks) {
        uint32_t t[4];
        PackA<T>(dpt + 8 * ks, t);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if constexpr (std::is_same<T, __half>::value)
            asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(da[ks][j]) : "r"(pa[ks][j]), "r"(t[j]));
          else
            asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(da[ks][j]) : "r"(pa[ks][j]), "r"(t[j]));
        }
      }
    } else {
      wg::Wait<0>();
      wg::FenceRegs(dpt);
#pragma unroll
      for (int i = 0; i < kBr / 8; ++i) {
        const float2 dd = LdPair<kLdPerm>(Db, i, lane);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float dl = (e & 1) ? dd.y : dd.x;
          dpt[4 * i + e] = stt[4 * i + e] * (dpt[4 * i + e] - dl);
        }
      }
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks) PackA<T>(dpt + 8 * ks, da[ks]);
    }
    if constexpr (kDq2) {  // the one dSᵀ stage: the other warpgroup's dQ of step u − 1 is done
      if (u > 0) {
        if (cw == 0)
          asm volatile("bar.sync 10, 256;\n" ::: "memory");
        else
          asm volatile("bar.sync 9, 256;\n" ::: "memory");
      }
    }
    // dSᵀ of this warpgroup's 64 keys into both 64-query column blocks (swizzled 128-byte rows)
    if constexpr (kOpt) {
      // stmatrix x4: matrix j = (query chunk 2ks + j/2, key rows +8·(j%2)), row addresses from
      // lanes 8j..8j+7
      const int row = cw * 64 + warp * 16 + ((lane / 8) & 1) * 8 + lane % 8;
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks) {
        const int g = 2 * ks + lane / 16;
        const uint32_t addr = sdSb + (g / 8) * kSBlk + row * 128 + (((g % 8) ^ (row % 8)) << 4);
        asm volatile(
            "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
            "r"(da[ks][0]), "r"(da[ks][1]), "r"(da[ks][2]), "r"(da[ks][3])
            : "memory");
      }
    } else {
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks)
#pragma unroll
        for (int c = 0; c < 2; ++c)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = key_row_l + r * 8;
            const int g = 2 * ks + c;  // 16-byte chunk (8 queries) across the 128 queries
            StShared32(
                sdSb + (g / 8) * kSBlk + row * 128 + (((g % 8) ^ (row % 8)) << 4) + (lane % 4) * 4,
                da[ks][2 * c + r]);
          }
    }
    wg::FenceProxyAsync();
    if constexpr (kEarlyFree) {
      if (u > 0)  // the dQ tile of step u − 1 (the fence above covers its stores too)
        asm volatile("bar.arrive %0, 160;\n" ::"r"(11 + 2 * cw + ((u - 1) & 1)) : "memory");
    } else if constexpr (kLateCommit) {
      if (u > 0) {  // the dQ tile of step u − 1 (the fence above covers its stores too)
        if (cw == 0)
          asm volatile("bar.arrive 5, 160;\n" ::: "memory");
        else
          asm volatile("bar.arrive 6, 160;\n" ::: "memory");
      }
    }
    wg::Fence();
    if constexpr (!kEarlyDv && !kEarlyDv2) {
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks)
        wg::Mma<T, D>::template RS<1>(dv, pa[ks], wg::Desc(sdOb + ks * 16 * 128, kBr * 128, 1024),
                                      1);
      wg::Commit();
    }
    if constexpr (kDkFirst) {
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks)
        wg::Mma<T, D>::template RS<1>(dk, da[ks], wg::Desc(sQb + ks * 16 * 128, kBr * 128, 1024),
                                      1);
      wg::Commit();
    }
    // the dQ staging slot was last read by the reduction issued one tile ago
    if constexpr (kOwnDq) {
      // kOwnDq: dQ of all 128 queries over this warpgroup's own 64 keys (two m64n64k64 SS:
      // A = its dSᵀ rows as MN-major dS, B = its K rows), no cross-warpgroup barrier
      float dq0[D / 2], dq1[D / 2];
      wg::Fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wg::Mma<T, D>::template SS<1, 1>(
            dq0, wg::Desc(sdSb + (cw * 64 + ks * 16) * 128, 8192, 1024),
            wg::Desc(sK + (cw * 64 + ks * 16) * 128, kBc * 128, 1024), ks > 0 ? 1 : 0);
#pragma unroll
      for (int ks = 0; ks < 4; ++ks)
        wg::Mma<T, D>::template SS<1, 1>(
            dq1, wg::Desc(sdSb + kSBlk + (cw * 64 + ks * 16) * 128, 8192, 1024),
            wg::Desc(sK + (cw * 64 + ks * 16) * 128, kBc * 128, 1024), ks > 0 ? 1 : 0);
      wg::Commit();
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks)
        wg::Mma<T, D>::template RS<1>(dk, da[ks], wg::Desc(sQb + ks * 16 * 128, kBr * 128, 1024),
                                      1);
      wg::Commit();
      // the staging slots were last read by the reductions issued one step ago
      if (leader) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      asm volatile("bar.sync %0, 128;\n" ::"r"(2 + cw) : "memory");
      wg::Wait<1>();  // dV and dQ are complete, dK may still run
      wg::FenceRegs(dq0);
      wg::FenceRegs(dq1);
      const int r_lo = warp * 16 + lane / 4;
      // as kSwapDq's staging below, per 64-query half: [64 rows][32 floats] boxes
      const bool odd = ((lane / 4) & 1) != 0;
      auto stage = [&](const float(&dq)[D / 2], uint32_t dst) {
#pragma unroll
        for (int i = 0; i < D / 8; ++i)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = r_lo + 8 * r;
            const int ii = odd ? (i ^ 2) : i;
            const int chunk = 2 * (ii % 4) + (lane % 4) / 2;
            const float x = odd ? dq[4 * (i ^ 2) + 2 * r] : dq[4 * i + 2 * r];
            const float y = odd ? dq[4 * (i ^ 2) + 2 * r + 1] : dq[4 * i + 2 * r + 1];
            asm volatile(
                "st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(
                    dst + (i / 4) * 8192 + row * 128 + ((chunk ^ (row % 8)) << 4) + (lane % 2) * 8),
                "f"(x), "f"(y)
                : "memory");
          }
      };
      stage(dq0, sdQw);
      stage(dq1, sdQw + 2 * 8192);
      wg::FenceProxyAsync();
      asm volatile("bar.sync %0, 128;\n" ::"r"(2 + cw) : "memory");
      if (leader) {
#pragma unroll
        for (int qh = 0; qh < 2; ++qh)
          if (m0 + qh * 64 < p.Sq)
#pragma unroll
            for (int j = 0; j < D / 32; ++j)
              asm volatile(
                  "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group"
                  " [%0, {%1, %2, %3}], [%4];\n" ::"l"(reinterpret_cast<uint64_t>(&tdq)),
                  "r"(32 * j), "r"(m0 + qh * 64), "r"(static_cast<int>(bh)),
                  "r"(sdQw + qh * 16384 + j * 8192)
                  : "memory");
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
      }
    } else if constexpr (kWriter) {
      asm volatile("bar.sync 1, 256;\n" ::: "memory");  // both warpgroups' dSᵀ are written
      auto dq_dk = [&](float(&dq)[D / 2]) {
        wg::Fence();
#pragma unroll
        for (int ks = 0; ks < kBc / 16; ++ks)
          wg::Mma<T, D>::template SS<1, 1>(
              dq, wg::Desc(sdSb + cw * kSBlk + ks * 16 * 128, 8192, 1024),
              wg::Desc(sK + ks * 16 * 128, kBc * 128, 1024), ks > 0 ? 1 : 0);
        wg::Commit();
#pragma unroll
        for (int ks = 0; ks < kBr / 16; ++ks)
          wg::Mma<T, D>::template RS<1>(dk, da[ks], wg::Desc(sQb + ks * 16 * 128, kBr * 128, 1024),
                                        1);
        wg::Commit();
        wg::Wait<1>();  // dV and dQ are complete, dK may still run
        wg::FenceRegs(dq);
        if constexpr (kDq2) {  // this warpgroup no longer reads the dSᵀ stage
          if (it + 1 < n_q_tiles) {
            if (cw == 0)
              asm volatile("bar.arrive 9, 256;\n" ::: "memory");
            else
              asm volatile("bar.arrive 10, 256;\n" ::: "memory");
          }
        }
      };
      if constexpr (kDeferDq) {
        float dq[D / 2];
        dq_dk(dq);
        // held in registers no wgmma defined: reading dq (or a mov.b32 copy, which ptxas
        // folds) in the next step made ptxas inject a wgmma wait there (C7517), after Sᵀ's
        // issue. x + 0 is x except that −0 becomes +0 (the same sum), so it stays.
#pragma unroll
        for (int i = 0; i < D / 2; ++i)
          asm volatile("add.f32 %0, %1, 0f00000000;\n" : "=f"(dqk[i]) : "f"(dq[i]));
      } else {
        float dq[D / 2];
        dq_dk(dq);
        if constexpr (kEarlyFree) {
          if (u >= 2) asm volatile("bar.sync %0, 160;\n" ::"r"(5 + 2 * cw + (u & 1)) : "memory");
          stage_store(dq, false, sdQw + (u & 1) * kdQBytes);
        } else {
          stage_store(dq, u > 0, sdQw + (kDq2 ? (u & 1) * kdQBytes : 0));
        }
        if constexpr (!kLateCommit) stage_commit();
      }
    } else {
      if (!kRedDq && !kWarpRed && leader)
        asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
      asm volatile("bar.sync 1, 256;\n" ::: "memory");  // both warpgroups' dSᵀ are written
      float dq[D / 2];
      wg::Fence();
#pragma unroll
      for (int ks = 0; ks < kBc / 16; ++ks)
        wg::Mma<T, D>::template SS<1, 1>(
            dq, wg::Desc(sdSb + cw * kSBlk + ks * 16 * 128, 8192, 1024),
            wg::Desc(sK + ks * 16 * 128, kBc * 128, 1024), ks > 0 ? 1 : 0);
      wg::Commit();
      if constexpr (!kDkFirst) {
#pragma unroll
        for (int ks = 0; ks < kBr / 16; ++ks)
          wg::Mma<T, D>::template RS<1>(dk, da[ks], wg::Desc(sQb + ks * 16 * 128, kBr * 128, 1024),
                                        1);
        wg::Commit();
        wg::Wait<1>();  // dV and dQ are complete, dK may still run
      } else {
        wg::Wait<0>();
      }
      wg::FenceRegs(dq);
      const int r_lo = warp * 16 + lane / 4;
      if constexpr (kRedDq) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int q = m0 + cw * 64 + r_lo + 8 * r;
          if (q < p.Sq) {
            float* row = dqa + static_cast<int64_t>(q) * D + (lane % 4) * 2;
#pragma unroll
            for (int i = 0; i < D / 8; ++i)
              asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(row + i * 8),
                           "f"(dq[4 * i + 2 * r]), "f"(dq[4 * i + 2 * r + 1])
                           : "memory");
          }
        }
      } else if constexpr (kOpt && (kSwapDq || kWarpRed)) {
        if constexpr (kWarpRed) {
          // this warp's rows were last read by its own reductions of one step ago
          if (lane == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
          __syncwarp();
        }
        // as below; with kSwapDq the odd quads store block i ^ 2 where the even ones store i
        const bool odd = kSwapDq && ((lane / 4) & 1) != 0;
#pragma unroll
        for (int i = 0; i < D / 8; ++i)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = r_lo + 8 * r;
            const int ii = odd ? (i ^ 2) : i;
            const int chunk = 2 * (ii % 4) + (lane % 4) / 2;
            const float a = odd ? dq[4 * (i ^ 2) + 2 * r] : dq[4 * i + 2 * r];
            const float c = odd ? dq[4 * (i ^ 2) + 2 * r + 1] : dq[4 * i + 2 * r + 1];
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(
                             sdQw + (i / 4) * 8192 + row * 128 + ((chunk ^ (row % 8)) << 4) +
                             (lane % 2) * 8),
                         "f"(a), "f"(c)
                         : "memory");
          }
      } else if constexpr (kOpt) {
        // two [64 rows][32 floats] boxes, 128-byte rows, 16-byte chunk c of row r at c ^ (r % 8)
#pragma unroll
        for (int i = 0; i < D / 8; ++i)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int row = r_lo + 8 * r;
            const int chunk = 2 * (i % 4) + (lane % 4) / 2;
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(
                             sdQw + (i / 4) * 8192 + row * 128 + ((chunk ^ (row % 8)) << 4) +
                             (lane % 2) * 8),
                         "f"(dq[4 * i + 2 * r]), "f"(dq[4 * i + 2 * r + 1])
                         : "memory");
          }
      } else {
#pragma unroll
        for (int i = 0; i < D / 8; ++i) {
          const int col = i * 8 + (lane % 4) * 2;
          asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(sdQw + (r_lo * D + col) * 4),
                       "f"(dq[4 * i]), "f"(dq[4 * i + 1])
                       : "memory");
          asm volatile(
              "st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(sdQw + ((r_lo + 8) * D + col) * 4),
              "f"(dq[4 * i + 2]), "f"(dq[4 * i + 3])
              : "memory");
        }
      }
      if constexpr (kWarpRed) {
        wg::FenceProxyAsync();
        __syncwarp();
        const int mw = m0 + cw * 64 + warp * 16;
        if (lane == 0 && mw < p.Sq) {
#pragma unroll
          for (int j = 0; j < D / 32; ++j)
            asm volatile(
                "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group"
                " [%0, {%1, %2, %3}], [%4];\n" ::"l"(reinterpret_cast<uint64_t>(&tdq)),
                "r"(32 * j), "r"(mw), "r"(static_cast<int>(bh)), "r"(sdQw + j * 8192 + warp * 2048)
                : "memory");
          asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        }
      } else if constexpr (!kRedDq) {
        wg::FenceProxyAsync();
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + cw) : "memory");
        const int mq = m0 + cw * 64;
        if (kOpt && leader && mq < p.Sq) {
#pragma unroll
          for (int j = 0; j < D / 32; ++j)
            asm volatile(
                "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group"
                " [%0, {%1, %2, %3}], [%4];\n" ::"l"(reinterpret_cast<uint64_t>(&tdq)),
                "r"(32 * j), "r"(mq), "r"(static_cast<int>(bh)), "r"(sdQw + j * 8192)
                : "memory");
          asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        } else if (leader && mq < p.Sq) {
          const uint32_t bytes = static_cast<uint32_t>(min(64, p.Sq - mq)) * D * 4;
          asm volatile(
              "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
                  dqa + static_cast<int64_t>(mq) * D),
              "r"(sdQw), "r"(bytes)
              : "memory");
          asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        }
      }
    }
    wg::Wait<0>();
    wg::FenceRegs(dk);
    wg::FenceRegs(dv);
    wg::FenceRegs(pa);
    wg::FenceRegs(da);
    if (lane == 0) MbarArrive(empty(st));  // Q, dO of this tile are no longer read
  }
  if constexpr (kEarlyFree) {
    if (i_begin < n_q_tiles) {  // the last step's dQ tile
      wg::FenceProxyAsync();
      asm volatile("bar.arrive %0, 160;\n" ::"r"(11 + 2 * cw + ((n_q_tiles - 1 - i_begin) & 1))
                   : "memory");
    }
  } else if constexpr (kLateCommit) {
    if (i_begin < n_q_tiles) stage_commit();  // the last step's dQ tile
  }
  if constexpr (kDeferDq) {
    if (i_begin < n_q_tiles) {  // the last step's dQ
      stage_store(dqk, true, sdQw);
      stage_commit();
    }
  }
  if (!kWriter && (kWarpRed ? lane == 0 : leader))
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");

  T* dkg = static_cast<T*>(p.dk) + b * p.sdk.b + h * p.sdk.h;
  T* dvg = static_cast<T*>(p.dv) + b * p.sdv.b + h * p.sdv.h;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = key_lo + r * 8;
    if (key < p.Sk) {
      T* dkr = dkg + static_cast<int64_t>(key) * p.sdk.s + (lane % 4) * 2;
      T* dvr = dvg + static_cast<int64_t>(key) * p.sdv.s + (lane % 4) * 2;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        *reinterpret_cast<uint32_t*>(dkr + i * 8) =
            Tc<T>::Pack(dk[4 * i + 2 * r] * p.scale, dk[4 * i + 2 * r + 1] * p.scale);
        *reinterpret_cast<uint32_t*>(dvr + i * 8) =
            Tc<T>::Pack(dv[4 * i + 2 * r], dv[4 * i + 2 * r + 1]);
      }
    }
  }
#endif
}

// The float32 dQ accumulator [B·H, Sq, D] as a 3-D tensor map {D, Sq, B·H}, boxes
// of [64 rows][32 floats] (128-byte rows, 128-byte swizzle), for the bulk
// tensor reduction of BwdWs128Kernel<kOpt>; rows past Sq are not written.
bool MakeDqAccumMap(CUtensorMap* map, float* ptr, const Params& p, unsigned box_rows = 64) {
  EncodeTiledFn enc = GetEncodeTiled();
  if (enc == nullptr || (reinterpret_cast<uintptr_t>(ptr) & 15) != 0) return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(p.D), static_cast<cuuint64_t>(p.Sq),
                              static_cast<cuuint64_t>(p.B) * p.H};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(p.D) * 4,
                                 static_cast<cuuint64_t>(p.Sq) * p.D * 4};
  const cuuint32_t box[3] = {32, box_rows, 1};
  const cuuint32_t es[3] = {1, 1, 1};
  return enc(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, ptr, dims, strides, box, es,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <typename T, int D, bool kOpt, bool kDkFirst, bool kEarlyDv = false, int kEmu = 0,
          int kFlags = 0>
const char* LaunchBwdWs128(const Params& p, cudaStream_t stream, bool* dq_perm = nullptr) {
  if constexpr ((kFlags & 512) != 0) {
    // the permuted dQ accumulator has whole 128-row tiles only when Sq % 128 == 0
    if (p.Sq % 128 != 0)
      return LaunchBwdWs128<T, D, kOpt, kDkFirst, kEarlyDv, kEmu, kFlags & ~512>(p, stream);
  }
  CUtensorMap tq, tk, tv, tdo, tdq;
  if (!MakeTensorMap<T>(&tq, p.q, p.sq, p, p.Sq, 128) ||
      !MakeTensorMap<T>(&tk, p.k, p.sk, p, p.Sk, 128) ||
      !MakeTensorMap<T>(&tv, p.v, p.sv, p, p.Sk, 128) ||
      !MakeTensorMap<T>(&tdo, p.dout, p.sdo, p, p.Sq, 128) ||
      (kOpt && !MakeDqAccumMap(&tdq, p.dq_accum, p, (kFlags & 8) ? 16 : 64)))
    return LaunchBwd<T, D>(p, stream);
  if (!kOpt) tdq = tq;  // unused
  // K, V; Q and dO × 2; dSᵀ × 2; dQ staging × 2 warpgroups (float32); L and D × 2; barriers;
  // alignment
  constexpr size_t smem =
      (2 * 128 * D + 4 * 128 * D + 2 * 128 * 128) * 2 + 2 * 64 * D * 4 + 4 * 128 * 4 + 8 * 5 + 1024;
  auto kernel = BwdWs128Kernel<T, D, kOpt, kDkFirst, kEarlyDv, kEmu, kFlags>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  const dim3 grid((p.Sk + 127) / 128, p.H, p.B);
  kernel<<<grid, 384, smem, stream>>>(p, tq, tk, tv, tdo, tdq);
  err = cudaGetLastError();
  if (err == cudaSuccess && dq_perm != nullptr) *dq_perm = (kFlags & 512) != 0;
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

// ---------------------------------------------------------------------------
// Run 16: BwdWs128Kernel<kOpt> with dQ and dK of step u−1 deferred into step u
// (variant 16). In variant 13 the two warpgroups run in lockstep (the dSᵀ
// barrier) and the tensor pipe has only dPᵀ queued while both do their
// exponentials (P) and the dS arithmetic. Here each warpgroup issues, per step
// u: Sᵀ_u, dPᵀ_u, then (once dV_{u−1} is done, so its P registers are free)
// dQ_{u−1} and dK_{u−1}, both SS from the previous dSᵀ stage (dK's A = dSᵀ
// K-major, its own 64 key rows; B = Q_{u−1} MN-major); the P loop runs under
// dPᵀ_u + dQ_{u−1} + dK_{u−1} (three GEMMs per warpgroup, 1536 tensor cycles
// for the CTA against ~1024 of exponentials). dQ_{u−1} is staged and reduced
// after the P loop, dV_u (RS) is issued after dSᵀ_u is stored and stays in
// flight over the barrier. Q_{u−1} is read until dK_{u−1} ends (mid step u), so
// Q has a 3-deep ring (L, D with it) and dO a 2-deep one (free once dV_{u−1}
// ends, at the start of step u). dK's SS form reads 32 KB more shared memory
// per step than the RS form but keeps dSᵀ out of the registers.
template <typename T, int D>
__global__ void __launch_bounds__(384, 1)
    BwdWs128PipeKernel(const Params p, const __grid_constant__ CUtensorMap tq,
                       const __grid_constant__ CUtensorMap tk,
                       const __grid_constant__ CUtensorMap tv,
                       const __grid_constant__ CUtensorMap tdo,
                       const __grid_constant__ CUtensorMap tdq) {
#ifdef BENCHD_FLASH_WGMMA
  static_assert(D == 64, "head dim 64 only");
  constexpr int kBc = 128, kBr = 128, kQBuf = 3, kOBuf = 2;
  constexpr uint32_t kKBytes = kBc * D * 2, kQBytes = kBr * D * 2;
  constexpr uint32_t kSBytes =
      kBc * kBr * 2;                     // dSᵀ [128 keys][128 queries]: 2 blocks of 64 queries
  constexpr uint32_t kSBlk = kBc * 128;  // one 64-query column block (128-byte rows)
  constexpr uint32_t kdQBytes = 64 * D * 4;  // one warpgroup's [64][64] float32 dQ tile
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (SmemAddr(smem_raw) + 1023u) & ~1023u;
  const uint32_t sK = base, sV = sK + kKBytes, sQ = sV + kKBytes, sdO = sQ + kQBuf * kQBytes,
                 sdS = sdO + kOBuf * kQBytes, sdQ = sdS + 2 * kSBytes;
  const uint32_t sLD = sdQ + 2 * kdQBytes;  // L then D, kQBuf × 128 floats each
  float* Ls = reinterpret_cast<float*>(smem_raw + (sLD - SmemAddr(smem_raw)));
  float* Dl = Ls + kQBuf * kBr;
  const uint32_t bars = sLD + 2 * kQBuf * kBr * 4;
  const uint32_t barKV = bars;
  auto full = [&](int s) { return bars + 8u * (1 + s); };
  auto emptyq = [&](int s) { return bars + 8u * (1 + kQBuf + s); };
  auto emptyo = [&](int s) { return bars + 8u * (1 + 2 * kQBuf + s); };

  const int tid = threadIdx.x, wgi = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int n0 = static_cast<int>(blockIdx.x) * kBc;
  const int h = blockIdx.y, b = blockIdx.z;
  const int64_t bh = static_cast<int64_t>(b) * p.H + h;
  const int n_q_tiles = (p.Sq + kBr - 1) / kBr;
  const int i_begin = p.causal ? min(n_q_tiles, n0 / kBr) : 0;

  if (tid == 0) {
    MbarInit(barKV, 1);
#pragma unroll
    for (int s = 0; s < kQBuf; ++s) {
      MbarInit(full(s), 1 + 32);  // the TMA thread's expect_tx + the warp's cp.async arrivals
      MbarInit(emptyq(s), 8);     // one arrival per consumer warp
    }
#pragma unroll
    for (int s = 0; s < kOBuf; ++s) MbarInit(emptyo(s), 8);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wgi == 0) {  // producer
    SetMaxNRegDec<24>();
    if (warp == 0) {
      const float* lg = p.lse + bh * p.Sq;
      const float* dg = p.delta + bh * p.Sq;
      if (lane == 0) {
        MbarExpectTx(barKV, 2 * kKBytes);
        TmaLoad4d(sK, &tk, barKV, 0, n0, h, b);
        TmaLoad4d(sV, &tv, barKV, 0, n0, h, b);
      }
      for (int it = i_begin; it < n_q_tiles; ++it) {
        const int u = it - i_begin, sq = u % kQBuf, so = u % kOBuf, m0 = it * kBr;
        if (u >= kQBuf) MbarWait(emptyq(sq), ((u / kQBuf) & 1) ^ 1);
        if (u >= kOBuf) MbarWait(emptyo(so), ((u / kOBuf) & 1) ^ 1);
        if (lane == 0) {
          MbarExpectTx(full(sq), 2 * kQBytes);
          TmaLoad4d(sQ + sq * kQBytes, &tq, full(sq), 0, m0, h, b);
          TmaLoad4d(sdO + so * kQBytes, &tdo, full(sq), 0, m0, h, b);
        }
#pragma unroll
        for (int e = 0; e < kBr / 32; ++e) {
          const int r = lane + 32 * e;
          const bool valid = m0 + r < p.Sq;
          CpAsync4(SmemAddr(Ls + sq * kBr + r), valid ? lg + m0 + r : lg, valid);
          CpAsync4(SmemAddr(Dl + sq * kBr + r), valid ? dg + m0 + r : dg, valid);
        }
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(full(sq))
                     : "memory");
      }
    }
    return;
  }

  SetMaxNRegInc<240>();
  const int cw = wgi - 1;
  const bool leader = (tid % 128) == 0;

  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.f;
  const int key_lo = n0 + cw * 64 + warp * 16 + lane / 4;
  const float sl2 = p.scale_log2;
  const uint32_t sKw = sK + cw * 64 * 128, sVw = sV + cw * 64 * 128;
  const uint32_t sdQw = sdQ + cw * kdQBytes;
  const int r_lo = warp * 16 + lane / 4;

  // dQ_{v} (in dq, complete) to the swizzled staging buffer, then one tensor reduction
  auto stage_dq = [&](float(&dq)[D / 2], int mq) {
    // the staging slot was last read by the reduction issued one step ago
    if (leader) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + cw) : "memory");
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int row = r_lo + 8 * r;
        const int chunk = 2 * (i % 4) + (lane % 4) / 2;
        asm volatile(
            "st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(sdQw + (i / 4) * 8192 + row * 128 +
                                                       ((chunk ^ (row % 8)) << 4) + (lane % 2) * 8),
            "f"(dq[4 * i + 2 * r]), "f"(dq[4 * i + 2 * r + 1])
            : "memory");
      }
    wg::FenceProxyAsync();
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + cw) : "memory");
    if (leader && mq < p.Sq) {
#pragma unroll
      for (int j = 0; j < D / 32; ++j)
        asm volatile(
            "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group"
            " [%0, {%1, %2, %3}], [%4];\n" ::"l"(reinterpret_cast<uint64_t>(&tdq)),
            "r"(32 * j), "r"(mq), "r"(static_cast<int>(bh)), "r"(sdQw + j * 8192)
            : "memory");
      asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    }
  };
  // dQ_v (query half cw, all 128 keys) from shared memory
  auto issue_dq = [&](float(&dq)[D / 2], uint32_t sdSv) {
    wg::Fence();
#pragma unroll
    for (int ks = 0; ks < kBc / 16; ++ks)
      wg::Mma<T, D>::template SS<1, 1>(dq, wg::Desc(sdSv + cw * kSBlk + ks * 16 * 128, 8192, 1024),
                                       wg::Desc(sK + ks * 16 * 128, kBc * 128, 1024),
                                       ks > 0 ? 1 : 0);
    wg::Commit();
  };
  // dK += dSᵀ_v Q_v, A = dSᵀ (this warpgroup's 64 key rows, K-major), B = Q_v (MN-major)
  auto issue_dk = [&](uint32_t sdSv, uint32_t sQv) {
    wg::Fence();
#pragma unroll
    for (int ks = 0; ks < kBr / 16; ++ks)
      wg::Mma<T, D>::template SS<0, 1>(
          dk, wg::Desc(sdSv + (ks / 4) * kSBlk + cw * 64 * 128 + (ks % 4) * 32, 16, 1024),
          wg::Desc(sQv + ks * 16 * 128, kBr * 128, 1024), 1);
    wg::Commit();
  };
  auto step = [&](int it, auto has_prev) {
    constexpr bool kPrev = decltype(has_prev)::value;
    const int u = it - i_begin, sq = u % kQBuf, so = u % kOBuf, m0 = it * kBr;
    const int sqp = (u + kQBuf - 1) % kQBuf;
    MbarWait(full(sq), (u / kQBuf) & 1);
    const uint32_t sQb = sQ + sq * kQBytes, sdOb = sdO + so * kQBytes;
    const uint32_t sdSb = sdS + (u & 1) * kSBytes, sdSp = sdS + ((u + 1) & 1) * kSBytes;
    const float* Lb = Ls + sq * kBr;
    const float* Db = Dl + sq * kBr;

    float stt[kBr / 2], dpt[kBr / 2];
    uint32_t pa[kBr / 16][4];
    wg::Fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wg::Mma<T, kBr>::template SS<0, 0>(stt, wg::Desc(sKw + kk * 32, 16, 1024),
                                         wg::Desc(sQb + kk * 32, 16, 1024), kk > 0 ? 1 : 0);
    wg::Commit();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wg::Mma<T, kBr>::template SS<0, 0>(dpt, wg::Desc(sVw + kk * 32, 16, 1024),
                                         wg::Desc(sdOb + kk * 32, 16, 1024), kk > 0 ? 1 : 0);
    wg::Commit();
    if constexpr (kPrev) {
      issue_dk(sdSp, sQ + sqp * kQBytes);
      wg::Wait<2>();  // Sᵀ_u
    } else {
      wg::Wait<1>();
    }
    wg::FenceRegs(stt);
    const bool need_mask =
        (m0 + kBr > p.Sq) || (n0 + kBc > p.Sk) || (p.causal && n0 + kBc - 1 > m0);
    auto p_loop = [&](auto masked) {
      constexpr bool kMasked = decltype(masked)::value;
#pragma unroll
      for (int i = 0; i < kBr / 8; ++i) {
        const int col = i * 8 + (lane % 4) * 2;
        const float2 lv = *reinterpret_cast<const float2*>(Lb + col);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float l = (e & 1) ? lv.y : lv.x;
          float pv = Ex2(fmaf(stt[4 * i + e], sl2, -l * kLog2e));
          if constexpr (kMasked) {
            const int q = m0 + col + (e & 1);
            const int key = key_lo + (e >> 1) * 8;
            if (q >= p.Sq || key >= p.Sk || (p.causal && key > q)) pv = 0.f;
          }
          stt[4 * i + e] = pv;
        }
      }
    };
    if (need_mask)
      p_loop(std::true_type{});
    else
      p_loop(std::false_type{});
    if constexpr (kPrev)
      wg::Wait<1>();  // dPᵀ_u is complete, dK_{u−1} may still run
    else
      wg::Wait<0>();
    wg::FenceRegs(dpt);
#pragma unroll
    for (int ks = 0; ks < kBr / 16; ++ks) PackA<T>(stt + 8 * ks, pa[ks]);
#pragma unroll
    for (int i = 0; i < kBr / 8; ++i) {
      const int col = i * 8 + (lane % 4) * 2;
      const float2 dd = *reinterpret_cast<const float2*>(Db + col);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float dl = (e & 1) ? dd.y : dd.x;
        dpt[4 * i + e] = stt[4 * i + e] * (dpt[4 * i + e] - dl);
      }
    }
    {
      // stmatrix x4: matrix j = (query chunk 2ks + j/2, key rows +8·(j%2)), row addresses from
      // lanes 8j..8j+7
      const int row = cw * 64 + warp * 16 + ((lane / 8) & 1) * 8 + lane % 8;
#pragma unroll
      for (int ks = 0; ks < kBr / 16; ++ks) {
        uint32_t da[4];
        PackA<T>(dpt + 8 * ks, da);
        const int g = 2 * ks + lane / 16;
        const uint32_t addr = sdSb + (g / 8) * kSBlk + row * 128 + (((g % 8) ^ (row % 8)) << 4);
        asm volatile(
            "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
            "r"(da[0]), "r"(da[1]), "r"(da[2]), "r"(da[3])
            : "memory");
      }
    }
    wg::FenceProxyAsync();
    float dq[D / 2];
    if constexpr (kPrev) issue_dq(dq, sdSp);
    wg::Fence();
#pragma unroll
    for (int ks = 0; ks < kBr / 16; ++ks)
      wg::Mma<T, D>::template RS<1>(dv, pa[ks], wg::Desc(sdOb + ks * 16 * 128, kBr * 128, 1024), 1);
    wg::Commit();
    if constexpr (kPrev) {
      wg::Wait<1>();  // dK_{u−1} and dQ_{u−1} are complete: Q_{u−1}, dSᵀ_{u−1} no longer read
      wg::FenceRegs(dk);
      wg::FenceRegs(dq);
      if (lane == 0) MbarArrive(emptyq(sqp));
      stage_dq(dq, (it - 1) * kBr + cw * 64);  // under dV_u
    }
    wg::Wait<0>();  // dV_u: P_u (pa) and dO_u are free
    wg::FenceRegs(pa);
    wg::FenceRegs(dv);
    if (lane == 0) MbarArrive(emptyo(so));
    asm volatile("bar.sync 1, 256;\n" ::: "memory");  // both warpgroups' dSᵀ_u are written
  };

  MbarWait(barKV, 0);
  if (i_begin < n_q_tiles) {
    step(i_begin, std::false_type{});
    for (int it = i_begin + 1; it < n_q_tiles; ++it) step(it, std::true_type{});
    // drain: dV of the last step, then its dQ and dK
    const int u = n_q_tiles - 1 - i_begin;
    float dq[D / 2];
    issue_dk(sdS + (u & 1) * kSBytes, sQ + (u % kQBuf) * kQBytes);
    issue_dq(dq, sdS + (u & 1) * kSBytes);
    wg::Wait<0>();
    wg::FenceRegs(dq);
    wg::FenceRegs(dk);
    stage_dq(dq, (n_q_tiles - 1) * kBr + cw * 64);
  }
  if (leader) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");

  T* dkg = static_cast<T*>(p.dk) + b * p.sdk.b + h * p.sdk.h;
  T* dvg = static_cast<T*>(p.dv) + b * p.sdv.b + h * p.sdv.h;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = key_lo + r * 8;
    if (key < p.Sk) {
      T* dkr = dkg + static_cast<int64_t>(key) * p.sdk.s + (lane % 4) * 2;
      T* dvr = dvg + static_cast<int64_t>(key) * p.sdv.s + (lane % 4) * 2;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        *reinterpret_cast<uint32_t*>(dkr + i * 8) =
            Tc<T>::Pack(dk[4 * i + 2 * r] * p.scale, dk[4 * i + 2 * r + 1] * p.scale);
        *reinterpret_cast<uint32_t*>(dvr + i * 8) =
            Tc<T>::Pack(dv[4 * i + 2 * r], dv[4 * i + 2 * r + 1]);
      }
    }
  }
#endif
}

template <typename T, int D>
const char* LaunchBwdWs128Pipe(const Params& p, cudaStream_t stream) {
  CUtensorMap tq, tk, tv, tdo, tdq;
  if (!MakeTensorMap<T>(&tq, p.q, p.sq, p, p.Sq, 128) ||
      !MakeTensorMap<T>(&tk, p.k, p.sk, p, p.Sk, 128) ||
      !MakeTensorMap<T>(&tv, p.v, p.sv, p, p.Sk, 128) ||
      !MakeTensorMap<T>(&tdo, p.dout, p.sdo, p, p.Sq, 128) || !MakeDqAccumMap(&tdq, p.dq_accum, p))
    return LaunchBwd<T, D>(p, stream);
  // K, V; Q × 3, dO × 2; dSᵀ × 2; dQ staging × 2 warpgroups (float32); L and D × 3; barriers;
  // alignment
  constexpr size_t smem =
      (2 * 128 * D + 5 * 128 * D + 2 * 128 * 128) * 2 + 2 * 64 * D * 4 + 6 * 128 * 4 + 8 * 9 + 1024;
  auto kernel = BwdWs128PipeKernel<T, D>;
  cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  const dim3 grid((p.Sk + 127) / 128, p.H, p.B);
  kernel<<<grid, 384, smem, stream>>>(p, tq, tk, tv, tdo, tdq);
  err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

// Backward variants. Default (run 14 on): BwdWs128Kernel<kOpt> (also variant
// 13): FlashAttention-3's d64 tiling, unmasked P loop, stmatrix dSᵀ, swizzled
// dQ staging + tensor reduction; 12 BwdWs128Kernel without kOpt (run 13's
// kernel); 14 kOpt + dK issued before the barrier; 15 kOpt + dV issued before
// dPᵀ is waited for; 16 BwdWs128PipeKernel (run 16: dK_{u−1} as SS under step u's
// exponentials, dQ_{u−1} beside dV_u; 3 % slower); 17 / 18 variant 13 with a
// quarter / half of the exponentials on the FMA pipe (Ex2Poly; run 17: 7 % / 8 %
// slower: MUFU is not the limit). Runs 11-12 (none beat run 9's kernel): 6 run 9's kernel
// (BwdWsKernel, the default until run 12); 8 run 9's kernel in LPT grid order;
// 9 the cross-tile pipelined loop with the scheduler barrier, LPT (dQ_u under
// tile u+1's elementwise work; serialised by ptxas, see the kernel); 10 the
// scheduler barrier, LPT; 11 K as the register A operand of Sᵀ. Run 18-21
// (BwdWs128Kernel's kFlags; none faster than 13, bench/flash_attention/RESULTS.md):
// 19 L/D permuted (LDS.128), 20 dQ by red.global, 21 19 + 20, 23 conflict-free
// dQ staging, 24 23 + per-warp reductions, 25 dV before the dPᵀ wait with
// float32 dS from the packed P, 26 23 + 24 + 25, 27 dQ per warpgroup over its
// own keys (no cross-warpgroup barrier), 28 27 + warpgroup 1 half a step late,
// 29 28 + 25. Variant 22 is 13 with the scalar pre/conversion kernels
// (flash_attention_bwd.cu). Runs 22-25 (FlashAttention-3's dQ writer warp, kWriter):
// 34 13 + the writer warp (the consumers stage dQ and arrive; warp 1 of the producer
// warpgroup issues the reductions), 35 34 + dQ staged in the next step under Sᵀ
// (kDeferDq; spills), 36 35 + conflict-free staging, 37 34 + conflict-free staging,
// 38 34 + FlashAttention-3's permuted dQ accumulator (kDqPerm: STS.128 staging, one plain
// bulk reduction, DqConvertPermKernel; Sq % 128 == 0, else 34), 39 38 + one dSᵀ stage and
// two dQ slots per warpgroup (kDq2), 40 39 + the late commit (kLateCommit: the dSᵀ fence of
// the next step covers the dQ stores) = the default, 41 40 + slots freed as soon as read
// (kEarlyFree).

// The worker's build (BENCHD_FLASH_DEFAULT_VARIANTS_ONLY, worker/CMakeLists.txt)
// compiles the defaults and their cp.async fallbacks only: the variants are
// bench/flash_attention's, and leaving them out halves this file's compile.
template <typename T>
const char* BwdWsDtype(const Params& p, cudaStream_t stream, bool* dq_perm) {
  switch (BackwardVariant()) {
#ifndef BENCHD_FLASH_DEFAULT_VARIANTS_ONLY
    case 6:
      return LaunchBwdWs<T, 64, false, false, false>(p, false, stream);
    case 8:
      return LaunchBwdWs<T, 64, false, false, false>(p, true, stream);
    case 9:
      return LaunchBwdWs<T, 64, true, true, false>(p, true, stream);
    case 10:
      return LaunchBwdWs<T, 64, false, true, false>(p, true, stream);
    case 11:
      return LaunchBwdWs<T, 64, false, false, true>(p, false, stream);
    case 12:
      return LaunchBwdWs128<T, 64, false, false>(p, stream);
    case 13:
      return LaunchBwdWs128<T, 64, true, false>(p, stream);
    case 14:
      return LaunchBwdWs128<T, 64, true, true>(p, stream);
    case 15:
      return LaunchBwdWs128<T, 64, true, false, true>(p, stream);
    case 16:
      return LaunchBwdWs128Pipe<T, 64>(p, stream);
    case 17:
      return LaunchBwdWs128<T, 64, true, false, false, 4>(p, stream);
    case 18:
      return LaunchBwdWs128<T, 64, true, false, false, 2>(p, stream);
    case 19:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 1>(p, stream);
    case 20:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 2>(p, stream);
    case 21:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 3>(p, stream);
    case 23:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 4>(p, stream);
    case 24:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 12>(p, stream);
    case 25:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 16>(p, stream);
    case 26:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 28>(p, stream);
    case 27:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 32>(p, stream);
    case 28:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 96>(p, stream);
    case 29:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 112>(p, stream);
    case 34:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 128>(p, stream);
    case 35:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 384>(p, stream);
    case 36:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 388>(p, stream);
    case 37:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 132>(p, stream);
    case 38:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 640>(p, stream, dq_perm);
    case 39:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 1664>(p, stream, dq_perm);
    case 40:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 3712>(p, stream, dq_perm);
    case 41:
      return LaunchBwdWs128<T, 64, true, false, false, 0, 7808>(p, stream, dq_perm);
#endif
    default:  // variant 40 (run 25 on; without kDqPerm where Sq % 128 != 0)
      return LaunchBwdWs128<T, 64, true, false, false, 0, 3712>(p, stream, dq_perm);
  }
}

// Variants (A/B timing in one process): 0 the default (warp-specialised, TMA,
// scheduler barrier); 2 the same without the scheduler barrier; 3 the
// cp.async kernel FwdWgmmaKernel (run 7's default); 4 d64 with 2 consumer
// warpgroups, d128 with a 3-stage ring; 5 run 7's alternative (d64, 2
// warpgroups, cp.async); run 21 (d64, OnlineSoftmax's kFx, 3-14 % slower): 30
// tree row max/sum, 31 every 8th key block's exponentials on the FMA pipe, 32
// 30 + 31, 33 30 + every 4th. Variant 1 (mma.sync) never gets here.
template <typename T>
const char* FwdDtype(const Params& p, int variant, cudaStream_t stream) {
#ifndef BENCHD_FLASH_DEFAULT_VARIANTS_ONLY
  Params lpt = p;  // variant 7: the LPT grid order (every head's heaviest causal tile first)
  lpt.lpt = true;
#endif
  if (p.D == 64) {
    switch (variant) {
#ifndef BENCHD_FLASH_DEFAULT_VARIANTS_ONLY
      case 2:
        return LaunchFwdWs<T, 64, 3, 128, 2, false>(p, stream);
      case 3:
        return LaunchFwd<T, 64, 3, 128>(p, stream);
      case 4:
        return LaunchFwdWs<T, 64, 2, 128, 2, true>(p, stream);
      case 5:
        return LaunchFwd<T, 64, 2, 128>(p, stream);
      case 7:
        return LaunchFwdWs<T, 64, 3, 128, 2, true>(lpt, stream);
      case 30:
        return LaunchFwdWs<T, 64, 3, 128, 2, true, 1>(p, stream);
      case 31:
        return LaunchFwdWs<T, 64, 3, 128, 2, true, 2>(p, stream);
      case 32:
        return LaunchFwdWs<T, 64, 3, 128, 2, true, 3>(p, stream);
      case 33:
        return LaunchFwdWs<T, 64, 3, 128, 2, true, 5>(p, stream);
#endif
      default:
        return LaunchFwdWs<T, 64, 3, 128, 2, true>(p, stream);
    }
  }
  if (p.D == 128) {
    switch (variant) {
#ifndef BENCHD_FLASH_DEFAULT_VARIANTS_ONLY
      case 2:
        return LaunchFwdWs<T, 128, 2, 128, 2, false>(p, stream);
      case 3:
      case 5:
        return LaunchFwd<T, 128, 2, 128>(p, stream);
      case 4:
        return LaunchFwdWs<T, 128, 2, 128, 3, true>(p, stream);
      case 7:
        return LaunchFwdWs<T, 128, 2, 128, 2, true>(lpt, stream);
#endif
      default:
        return LaunchFwdWs<T, 128, 2, 128, 2, true>(p, stream);
    }
  }
  return "flash attention: no wgmma forward for this head dim";
}

}  // namespace

bool DeviceHasWgmma() {
#ifdef BENCHD_FLASH_NO_SM90A
  return false;  // built without sm_90a code: the kernels above are empty
#endif
  static int cached[64];  // 0 unknown, 1 yes, 2 no
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (dev < 0 || dev >= 64) return false;
  if (cached[dev] == 0) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    cached[dev] = (major == 9 && minor == 0) ? 1 : 2;
  }
  return cached[dev] == 1;
}

const char* LaunchForwardWgmma(const Params& p, FlashDtype dtype, int variant,
                               cudaStream_t stream) {
  if (dtype == FlashDtype::kHalf) return FwdDtype<__half>(p, variant, stream);
  return FwdDtype<__nv_bfloat16>(p, variant, stream);
}

// The D/zeroing pre-kernel and the dQ conversion run around it
// (flash_attention_bwd.cu).
const char* LaunchBackwardWgmmaMain(const Params& p, FlashDtype dtype, cudaStream_t stream,
                                    bool* dq_perm) {
  if (dq_perm != nullptr) *dq_perm = false;
  if (p.D != 64) return "flash attention: no wgmma backward for this head dim";
  // variant 3: run 7's kernel (cp.async, CTA barriers, Kᵀ copy); else the warp-specialised one
  if (BackwardVariant() == 3) {
    if (dtype == FlashDtype::kHalf) return LaunchBwd<__half, 64>(p, stream);
    return LaunchBwd<__nv_bfloat16, 64>(p, stream);
  }
  if (dtype == FlashDtype::kHalf) return BwdWsDtype<__half>(p, stream, dq_perm);
  return BwdWsDtype<__nv_bfloat16>(p, stream, dq_perm);
}

}  // namespace benchd::worker::flash::detail
