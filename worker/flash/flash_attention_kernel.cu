// The API of flash_attention_kernel.h: argument checks and dispatch to the
// tensor-core kernels (flash_attention_fwd.cu, flash_attention_bwd.cu) or the
// float32 kernels (flash_attention_fp32.cu). Design notes in
// flash_attention_common.cuh.
#include <cmath>
#include <limits>

#include "worker/flash/flash_attention_common.cuh"
#include "worker/flash/flash_attention_kernel.h"

namespace benchd::worker::flash {
namespace detail {
namespace {
int g_forward_variant = 0;
int g_backward_variant = 0;
}  // namespace
int ForwardVariant() { return g_forward_variant; }
int BackwardVariant() { return g_backward_variant; }
void SetVariant(int forward, int backward) {
  g_forward_variant = forward;
  g_backward_variant = backward;
}
}  // namespace detail

namespace {

using detail::Params;
using detail::Strides;

Strides StridesOf(const int64_t (&s)[4]) { return Strides{s[0], s[1], s[2]}; }

bool Aligned16(const void* ptr, const int64_t (&s)[4], size_t elem) {
  if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return false;
  for (int i = 0; i < 3; ++i)
    if ((s[i] * static_cast<int64_t>(elem)) % 16 != 0) return false;
  return true;
}

size_t ElemSize(FlashDtype d) { return d == FlashDtype::kFloat ? 4 : 2; }

const char* CheckShape(FlashDtype dtype, int64_t B, int64_t H, int64_t Sq, int64_t Sk, int64_t D,
                       float scale) {
  if (dtype != FlashDtype::kFloat && dtype != FlashDtype::kBFloat16 && dtype != FlashDtype::kHalf)
    return "flash attention: unknown dtype";
  if (D != 16 && D != 32 && D != 64 && D != 128)
    return "flash attention: head_dim must be 16, 32, 64 or 128";
  if (B < 1 || H < 1 || Sq < 1 || Sk < 1) return "flash attention: empty shape";
  if (B > 65535 || H > 65535) return "flash attention: batch and heads must be <= 65535";
  if (Sq > std::numeric_limits<int>::max() / 2 || Sk > std::numeric_limits<int>::max() / 2)
    return "flash attention: sequence too long";
  if (!(scale > 0.f) || !std::isfinite(scale)) return "flash attention: softmax_scale must be > 0";
  return nullptr;
}

const char* CheckOperand(const void* ptr, const int64_t (&s)[4], FlashDtype dtype) {
  if (ptr == nullptr) return "flash attention: null operand";
  if (s[3] != 1) return "flash attention: the last dimension must be contiguous";
  if (dtype != FlashDtype::kFloat && !Aligned16(ptr, s, ElemSize(dtype)))
    return "flash attention: bf16/fp16 operands need 16-byte aligned rows (strides multiple of 8)";
  if (dtype == FlashDtype::kFloat && reinterpret_cast<uintptr_t>(ptr) % 4 != 0)
    return "flash attention: misaligned float32 operand";
  return nullptr;
}

void Fill(Params& p, FlashDtype, int64_t B, int64_t H, int64_t Sq, int64_t Sk, int64_t D,
          bool causal, float scale) {
  p.B = static_cast<int>(B);
  p.H = static_cast<int>(H);
  p.Sq = static_cast<int>(Sq);
  p.Sk = static_cast<int>(Sk);
  p.D = static_cast<int>(D);
  p.causal = causal;
  p.scale = scale;
  p.scale_log2 = scale * detail::kLog2e;
}

size_t AlignUp(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

size_t FlashBackwardWorkspaceBytes(const FlashBackwardArgs& a) {
  const size_t rows = static_cast<size_t>(a.batch) * a.heads * a.seqlen_q;
  size_t bytes = AlignUp(rows * sizeof(float));
  if (a.dtype != FlashDtype::kFloat) bytes += AlignUp(rows * a.head_dim * sizeof(float));
  return bytes;
}

const char* LaunchFlashForward(const FlashForwardArgs& a, void* stream) {
  if (const char* e = CheckShape(a.dtype, a.batch, a.heads, a.seqlen_q, a.seqlen_k, a.head_dim,
                                 a.softmax_scale))
    return e;
  for (const FlashInput* t : {&a.q, &a.k, &a.v})
    if (const char* e = CheckOperand(t->data, t->stride, a.dtype)) return e;
  if (const char* e = CheckOperand(a.o.data, a.o.stride, a.dtype)) return e;
  if (a.lse == nullptr) return "flash attention: null lse";
  Params p;
  Fill(p, a.dtype, a.batch, a.heads, a.seqlen_q, a.seqlen_k, a.head_dim, a.causal, a.softmax_scale);
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.out = a.o.data;
  p.lse_out = a.lse;
  p.sq = StridesOf(a.q.stride);
  p.sk = StridesOf(a.k.stride);
  p.sv = StridesOf(a.v.stride);
  p.so = StridesOf(a.o.stride);
  auto s = static_cast<cudaStream_t>(stream);
  if (a.dtype == FlashDtype::kFloat) return detail::LaunchForwardFloat(p, s);
  return detail::LaunchForwardTensorCore(p, a.dtype, s);
}

const char* LaunchFlashBackward(const FlashBackwardArgs& a, void* stream) {
  if (const char* e = CheckShape(a.dtype, a.batch, a.heads, a.seqlen_q, a.seqlen_k, a.head_dim,
                                 a.softmax_scale))
    return e;
  for (const FlashInput* t : {&a.q, &a.k, &a.v, &a.o, &a.dout})
    if (const char* e = CheckOperand(t->data, t->stride, a.dtype)) return e;
  for (const FlashOutput* t : {&a.dq, &a.dk, &a.dv})
    if (const char* e = CheckOperand(t->data, t->stride, a.dtype)) return e;
  if (a.lse == nullptr) return "flash attention: null lse";
  if (a.workspace == nullptr || reinterpret_cast<uintptr_t>(a.workspace) % 256 != 0)
    return "flash attention: workspace must be non-null and 256-byte aligned";
  Params p;
  Fill(p, a.dtype, a.batch, a.heads, a.seqlen_q, a.seqlen_k, a.head_dim, a.causal, a.softmax_scale);
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.o = a.o.data;
  p.dout = a.dout.data;
  p.lse = a.lse;
  p.dq = a.dq.data;
  p.dk = a.dk.data;
  p.dv = a.dv.data;
  p.sq = StridesOf(a.q.stride);
  p.sk = StridesOf(a.k.stride);
  p.sv = StridesOf(a.v.stride);
  p.so = StridesOf(a.o.stride);
  p.sdo = StridesOf(a.dout.stride);
  p.sdq = StridesOf(a.dq.stride);
  p.sdk = StridesOf(a.dk.stride);
  p.sdv = StridesOf(a.dv.stride);
  const size_t rows = static_cast<size_t>(a.batch) * a.heads * a.seqlen_q;
  p.delta = static_cast<float*>(a.workspace);
  auto s = static_cast<cudaStream_t>(stream);
  if (a.dtype == FlashDtype::kFloat) return detail::LaunchBackwardFloat(p, s);
  p.dq_accum =
      reinterpret_cast<float*>(static_cast<char*>(a.workspace) + AlignUp(rows * sizeof(float)));
  return detail::LaunchBackwardTensorCore(p, a.dtype, s);
}

}  // namespace benchd::worker::flash
