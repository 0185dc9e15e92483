// The CS336 Transformer LM's configuration: presets, defaults, exact parameter
// counts and model FLOPs. Torch-free, so the daemon can validate and count
// without loading LibTorch.
#ifndef BENCHD_COMMON_MODEL_CONFIG_H_
#define BENCHD_COMMON_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd {

struct Preset {
  std::string name;
  int64_t vocab_size;
  int64_t d_model;
  int64_t d_ff;
  int64_t num_layers;
  int64_t num_heads;
};

// Every preset, in size order: tiny and mini (for CPUs), then the course's
// small, medium, large, xl and 2.7B, and its XXL of the 4D-parallelism
// questions (for Bench.Estimate: no single device holds it).
const std::vector<Preset>& Presets();

// Fills a ModelConfig from its preset and defaults (rope_theta 10000) and checks
// it: INVALID_ARGUMENT naming the field, what came and what is accepted.
// `field_prefix` is prepended to field names in messages ("benchmark.model.").
absl::StatusOr<v1::ModelConfig> ResolveModelConfig(const v1::ModelConfig& in,
                                                   const std::string& field_prefix = "model.");

// 2·V·d + L·(4d² + 3·d·d_ff + 2d) + d: embedding, lm_head, per layer q/k/v/o,
// SwiGLU w1/w2/w3 and two RMSNorm gains, then the final RMSNorm gain.
int64_t ParameterCount(const v1::ModelConfig& resolved);

// Model FLOPs of one forward pass over batch×context tokens: 2 FLOPs per
// multiply-add in every matmul (projections, SwiGLU, lm_head) plus attention's
// QKᵀ and weighted sum over the full T×T scores (4·L·T·d per token).
double ForwardFlops(const v1::ModelConfig& resolved, int64_t batch, int64_t context);

// forward = 1×, forward_backward and train_step = 3× the forward FLOPs
// (backward costs two matmuls per forward one; the optimizer's elementwise
// work is not counted, as is usual for MFU).
double StepFlops(const v1::ModelConfig& resolved, v1::BenchmarkMode mode, int64_t batch,
                 int64_t context);

// The FLOPs of the attention core's parts in one forward over all layers
// (the profile request's attention ranges), with T the context and H·d_k =
// d_model: scores QKᵀ/√d_k (2·T·T·d_k per head, plus T·T for the scaling),
// the causal mask (T·T), softmax (5 per score: max, subtract, exp, sum,
// divide) and the weighted sum (2·T·T·d_k). The matmuls' part is what
// ForwardFlops counts for attention.
struct AttentionFlops {
  double scores = 0, mask = 0, softmax = 0, weighted_sum = 0;
  double total() const { return scores + mask + softmax + weighted_sum; }
};
AttentionFlops ForwardAttentionFlops(const v1::ModelConfig& resolved, int64_t batch,
                                     int64_t context);

// Parses "fp32", "bf16", "fp16" (and "float32", "bfloat16", "float16").
absl::StatusOr<v1::Precision> ParsePrecision(const std::string& s);
absl::StatusOr<v1::BenchmarkMode> ParseMode(const std::string& s);
std::string PrecisionName(v1::Precision p);  // "fp32", ...
std::string ModeName(v1::BenchmarkMode m);   // "forward", ...

}  // namespace benchd

#endif  // BENCHD_COMMON_MODEL_CONFIG_H_
