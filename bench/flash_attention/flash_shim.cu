// A flat extern "C" face of worker/flash/flash_attention_kernel.h for the
// ctypes harness (flash_harness.py). Strides are passed as int64[4] arrays per
// operand; each function returns nullptr on success, else the error message.
#include <cstdint>

#include "worker/flash/flash_attention_common.cuh"
#include "worker/flash/flash_attention_kernel.h"

namespace fa = benchd::worker::flash;

namespace {
void Copy4(int64_t (&dst)[4], const int64_t* src) {
  for (int i = 0; i < 4; ++i) dst[i] = src[i];
}
}  // namespace

extern "C" {

// dtype: 0 float32, 1 bfloat16, 2 float16.
const char* benchd_flash_forward(int dtype, int64_t B, int64_t H, int64_t Sq, int64_t Sk, int64_t D,
                                 int causal, float scale, const void* q, const int64_t* qs,
                                 const void* k, const int64_t* ks, const void* v, const int64_t* vs,
                                 void* o, const int64_t* os, float* lse, void* stream) {
  fa::FlashForwardArgs a;
  a.dtype = static_cast<fa::FlashDtype>(dtype);
  a.batch = B;
  a.heads = H;
  a.seqlen_q = Sq;
  a.seqlen_k = Sk;
  a.head_dim = D;
  a.causal = causal != 0;
  a.softmax_scale = scale;
  a.q.data = q;
  Copy4(a.q.stride, qs);
  a.k.data = k;
  Copy4(a.k.stride, ks);
  a.v.data = v;
  Copy4(a.v.stride, vs);
  a.o.data = o;
  Copy4(a.o.stride, os);
  a.lse = lse;
  return fa::LaunchFlashForward(a, stream);
}

uint64_t benchd_flash_backward_workspace(int dtype, int64_t B, int64_t H, int64_t Sq, int64_t D) {
  fa::FlashBackwardArgs a;
  a.dtype = static_cast<fa::FlashDtype>(dtype);
  a.batch = B;
  a.heads = H;
  a.seqlen_q = Sq;
  a.head_dim = D;
  return fa::FlashBackwardWorkspaceBytes(a);
}

// ptrs: q, k, v, o, dout, dq, dk, dv; strides: 8 x int64[4] in the same order.
const char* benchd_flash_backward(int dtype, int64_t B, int64_t H, int64_t Sq, int64_t Sk,
                                  int64_t D, int causal, float scale, void* const* ptrs,
                                  const int64_t* strides, const float* lse, void* workspace,
                                  void* stream) {
  fa::FlashBackwardArgs a;
  a.dtype = static_cast<fa::FlashDtype>(dtype);
  a.batch = B;
  a.heads = H;
  a.seqlen_q = Sq;
  a.seqlen_k = Sk;
  a.head_dim = D;
  a.causal = causal != 0;
  a.softmax_scale = scale;
  fa::FlashInput* ins[5] = {&a.q, &a.k, &a.v, &a.o, &a.dout};
  for (int i = 0; i < 5; ++i) {
    ins[i]->data = ptrs[i];
    Copy4(ins[i]->stride, strides + 4 * i);
  }
  fa::FlashOutput* outs[3] = {&a.dq, &a.dk, &a.dv};
  for (int i = 0; i < 3; ++i) {
    outs[i]->data = ptrs[5 + i];
    Copy4(outs[i]->stride, strides + 4 * (5 + i));
  }
  a.lse = lse;
  a.workspace = workspace;
  return fa::LaunchFlashBackward(a, stream);
}

// Tile-configuration variants (0 = default; 1 = the first version).
void benchd_flash_set_variant(int forward, int backward) {
  benchd::worker::flash::detail::SetVariant(forward, backward);
}

}  // extern "C"
