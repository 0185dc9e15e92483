// Applying a benchmark's options in the worker (docs/architecture.md
// "Options"): the checks that depend on the device, the TF32 guard, the
// optimizer dispatch, and one scope that applies them all for a job.
#ifndef BENCHD_WORKER_JOB_OPTIONS_H_
#define BENCHD_WORKER_JOB_OPTIONS_H_

#include <torch/torch.h>

#include <optional>

#include "absl/status/status.h"
#include "benchd/v1/bench.pb.h"
#include "worker/adamw.h"
#include "worker/attention_backend.h"
#include "worker/device.h"
#include "worker/transformer.h"

namespace benchd::worker {

// INVALID_ARGUMENT naming the field when this device cannot honour an option
// of the (resolved) spec: cuda_graph on a CPU; efficient or cudnn attention
// on a CPU (they are CUDA kernels; flash and math have CPU kernels); flash or
// cudnn attention in fp32 on CUDA (those kernels take fp16/bf16 only).
absl::Status CheckOptionsForDevice(const v1::BenchmarkSpec& spec, const WorkerDevice& device);

// allow_tf32: TF32 for fp32 matmuls and cuDNN (setAllowTF32CuBLAS, setAllowTF32CuDNN
// and float32 matmul precision "high") until it dies, then the previous
// settings. Off: changes nothing (PyTorch's default is full fp32 for matmuls).
// Process-wide, like the SDPA switches.
class Tf32Guard {
 public:
  explicit Tf32Guard(bool allow_tf32);
  ~Tf32Guard();
  Tf32Guard(const Tf32Guard&) = delete;
  Tf32Guard& operator=(const Tf32Guard&) = delete;

 private:
  bool active_ = false;
  at::Float32MatmulPrecision matmul_ = at::Float32MatmulPrecision::HIGHEST;
  bool cudnn_ = true;
};

// One AdamW step the way the spec asks: with cuda_graph the capturable
// foreach path (the only one a graph may hold, see BenchmarkSpec.cuda_graph),
// else faithful, foreach or fused.
void RunOptimizerStep(AdamW& optimizer, const v1::BenchmarkSpec& spec);

// For the length of a job: the model's attention implementation, the forced
// SDPA backend, TF32, fused ops and the weight copies (made from the current
// fp32 weights and handed to the optimizer). After: faithful attention and
// ops, no copies.
class JobOptionsScope {
 public:
  JobOptionsScope(const v1::BenchmarkSpec& spec, TransformerLM model, AdamW& optimizer);
  ~JobOptionsScope();
  JobOptionsScope(const JobOptionsScope&) = delete;
  JobOptionsScope& operator=(const JobOptionsScope&) = delete;

 private:
  TransformerLM model_;
  AdamW& optimizer_;
  bool weight_copies_ = false;
  SdpBackendGuard sdp_;
  Tf32Guard tf32_;
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_JOB_OPTIONS_H_
