// The bundle a benchmark with export_parity writes for the reference check
// (bench/reference/parity.py): the initial weights, the batch and the first
// forward's logits, so an independent PyTorch implementation can start from
// exactly what the worker started from and compare what it computes.
#ifndef BENCHD_WORKER_PARITY_EXPORT_H_
#define BENCHD_WORKER_PARITY_EXPORT_H_

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd::worker {

// Version tag stored under "format"; parity.py refuses any other.
inline constexpr char kParityBundleFormat[] = "benchd-parity/1";

// <artifacts_dir>/<job_id>/parity.pt. INVALID_ARGUMENT when the worker has no
// artifacts dir, or when job_id is empty or not a plain name ([A-Za-z0-9_-]).
absl::StatusOr<std::string> ParityBundlePath(const std::string& artifacts_dir,
                                             const std::string& job_id);

// Contents, as one Dict (Python: a dict) written by torch::pickle_save, which
// writes torch.save's zip format:
//   "format"  kParityBundleFormat
//   "params"  {name: fp32 tensor}, the module's parameter names
//             ("token_embeddings.weight", "layers.0.attn.q_proj.weight", ...)
//   "inputs", "targets"  the batch, int64 [batch, context]
//   "logits"  the first step's forward output, fp32 [batch, context, vocab]
//             (under that step's autocast: bf16/fp16 values widened to fp32)
//   "config"  {vocab_size, d_model, d_ff, num_layers, num_heads, batch_size,
//              context_length, warmup_steps, measure_steps, seed: int;
//              rope_theta: float; preset, mode, precision, device: str;
//              spec: the resolved BenchmarkSpec in protobuf text format}
// Every tensor is on the CPU.
class ParityBundle {
 public:
  // Copies the parameters and the batch to the CPU; call before the first step.
  ParityBundle(const v1::BenchmarkSpec& spec, const std::string& device_name,
               const torch::nn::Module& model, const torch::Tensor& inputs,
               const torch::Tensor& targets);

  // The first step's forward logits. Held, not copied, until Write: nothing
  // in a step writes to them in place, and a copy inside the timed forward
  // would slow the step it measures.
  void SetLogits(const torch::Tensor& logits) { logits_ = logits.detach(); }
  bool has_logits() const { return logits_.defined(); }

  // Writes the bundle to `path` (creating its directory; through a temporary
  // file, so a reader never sees half a bundle). Throws on error.
  void Write(const std::string& path) const;

 private:
  const v1::BenchmarkSpec spec_;
  const std::string device_name_;
  c10::Dict<std::string, at::Tensor> params_;
  torch::Tensor inputs_, targets_, logits_;
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_PARITY_EXPORT_H_
