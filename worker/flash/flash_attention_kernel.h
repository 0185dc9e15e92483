// benchd's own FlashAttention-2 (issue 34): a fused forward and a backward by
// recomputation, in plain CUDA C++ (no LibTorch, no CUTLASS), compiled by
// nvcc on its own as worker/rope_kernel.cu is. The design notes are at the top
// of flash_attention_common.cuh; this header is the whole API.
//
// Shapes: Q, O, dO, dQ [B, H, Sq, D]; K, V, dK, dV [B, H, Sk, D], each with
// any strides in elements (a [B, S, H, D] tensor transposed to [B, H, S, D]
// is fine) except that the last dimension must be contiguous (stride[3] == 1).
// bf16/fp16 (tensor cores) additionally need 16-byte aligned base pointers and
// strides[0..2] that are multiples of 8 elements (cp.async moves 16 bytes).
// L (logsumexp, natural log, of the scaled scores) is float32 [B, H, Sq]
// contiguous. Head dims 16, 32, 64, 128; any Sq, Sk >= 1.
//
// Causal is top-left: query i attends keys j <= i (the course's convention;
// with Sq == Sk it is the usual causal mask).
#ifndef BENCHD_WORKER_FLASH_FLASH_ATTENTION_KERNEL_H_
#define BENCHD_WORKER_FLASH_FLASH_ATTENTION_KERNEL_H_

#include <cstddef>
#include <cstdint>

namespace benchd::worker::flash {

enum class FlashDtype { kFloat, kBFloat16, kHalf };

// An input operand [B, H, S, D]: strides in elements, stride[3] must be 1.
struct FlashInput {
  const void* data = nullptr;
  int64_t stride[4] = {0, 0, 0, 1};
};

// An output operand [B, H, S, D] of the inputs' dtype.
struct FlashOutput {
  void* data = nullptr;
  int64_t stride[4] = {0, 0, 0, 1};
};

struct FlashForwardArgs {
  FlashDtype dtype = FlashDtype::kBFloat16;
  int64_t batch = 0, heads = 0, seqlen_q = 0, seqlen_k = 0, head_dim = 0;
  bool causal = false;
  float softmax_scale = 0.f;  // usually 1/sqrt(head_dim); must be > 0
  FlashInput q, k, v;
  FlashOutput o;
  float* lse = nullptr;  // [B, H, Sq] float32 contiguous
};

struct FlashBackwardArgs {
  FlashDtype dtype = FlashDtype::kBFloat16;
  int64_t batch = 0, heads = 0, seqlen_q = 0, seqlen_k = 0, head_dim = 0;
  bool causal = false;
  float softmax_scale = 0.f;
  FlashInput q, k, v, o, dout;
  const float* lse = nullptr;  // the forward's L
  FlashOutput dq, dk, dv;
  // FlashBackwardWorkspaceBytes(args) bytes of device memory, 256-byte
  // aligned, that the launch may overwrite: D = rowsum(dO∘O) (float32
  // [B, H, Sq]) and, for bf16/fp16, the float32 dQ accumulator [B, H, Sq, D].
  void* workspace = nullptr;
};

size_t FlashBackwardWorkspaceBytes(const FlashBackwardArgs& args);

// O and L. Returns nullptr on success, else a static message (nothing is
// launched after a failed argument check; a launch error is reported as the
// CUDA error string).
const char* LaunchFlashForward(const FlashForwardArgs& args, void* stream);

// dQ, dK, dV from Q, K, V, O, dO, L: a preprocessing kernel (D, and zeroing
// the dQ accumulator), the main kernel (one CTA per key tile, dK/dV in
// registers, dQ added into the float32 accumulator with atomics), and a
// kernel that scales the accumulator and writes dQ in the input dtype.
const char* LaunchFlashBackward(const FlashBackwardArgs& args, void* stream);

}  // namespace benchd::worker::flash

#endif  // BENCHD_WORKER_FLASH_FLASH_ATTENTION_KERNEL_H_
