// The weight_copies option's optimizer kernel: the course's AdamW update of an
// fp32 master weight from the gradient of its bf16/fp16 copy, which it then
// rewrites, in one pass (reads p, g, m, v; writes p, m, v, copy: 28 bytes per
// parameter with 2-byte g and copy). The same kernel updates an fp32 weight
// without a copy from its fp32 gradient (32 bytes per parameter), so that
// with weight copies every parameter takes one kernel family. Plain CUDA, no
// LibTorch, so nvcc compiles it on its own (worker/CMakeLists.txt);
// adamw_impls.cc calls it.
#ifndef BENCHD_WORKER_ADAMW_COPY_KERNEL_H_
#define BENCHD_WORKER_ADAMW_COPY_KERNEL_H_

#include <cstdint>

namespace benchd::worker {

struct AdamWCopyArgs {
  float* param = nullptr;       // fp32 master weight, updated in place
  const void* grad = nullptr;   // the copy's gradient, bf16 or fp16; fp32 without a copy
  float* exp_avg = nullptr;     // m
  float* exp_avg_sq = nullptr;  // v
  void* copy = nullptr;         // bf16 or fp16, rewritten from the new param; null: none
  int64_t numel = 0;
  bool half = false;  // grad and copy are fp16 (else bf16); ignored without a copy
  // The update, per element, in float32:
  //   m = beta1 m + (1-beta1) g;  v = beta2 v + (1-beta2) g²
  //   p = p - alpha m/(sqrt(v)+eps);  p = p - lr_weight_decay p;  copy = p
  // with alpha = lr sqrt(1-beta2^t)/(1-beta1^t) (AdamW::Step's formulas).
  // 1-beta comes from the host, computed in double as ATen computes a
  // scalar: 1.0f - 0.999f is 1.3e-5 away from float(1 - 0.999).
  float beta1 = 0, beta2 = 0, one_minus_beta1 = 0, one_minus_beta2 = 0;
  float alpha = 0, eps = 0, lr_weight_decay = 0;
  // Where α comes from on the device (the optimizer_overlap option, whose
  // launches a CUDA graph replays): when `step` is set, t = *step (the
  // parameter's step count, already advanced for this update, as torch's
  // fused kernels read it) and α = alpha_table[t], a table the host filled
  // with the float `alpha` it would pass for each t (AdamW::StepSize), so both
  // ways give the same bits. Past the table's end α is computed on the device
  // in double from lr, beta1_d and beta2_d (the same formula; CUDA's pow
  // may differ from the host's in the last bit of a double).
  // Blocks per launch at most (a grid-stride loop beyond); 0: 4096.
  int max_blocks = 0;
  const float* step = nullptr;
  const float* alpha_table = nullptr;
  int64_t alpha_table_size = 0;
  double lr = 0, beta1_d = 0, beta2_d = 0;
};

// Launches the update on `stream` (a cudaStream_t). Returns nullptr, or the
// CUDA error's text when the launch failed.
const char* LaunchAdamWCopy(const AdamWCopyArgs& args, void* stream);

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_ADAMW_COPY_KERNEL_H_
