// Memory by formula: the bytes a step of the CS336 LM needs on a device, term
// by term, as benchd's worker allocates them (docs/architecture.md "Memory by
// formula"; checked against measured peaks in docs/results/memory-estimate.md).
// Torch-free, so the daemon answers Bench.Estimate and checks Submit with it,
// and benchctl prints it.
//
// What is counted (worker/transformer.cc, worker/explicit_step.cc, the tensors
// autograd's nodes save; N = batch x context tokens, S = batch x heads x
// context² attention scores, a = 2 bytes under bf16/fp16 autocast, else 4):
// - model state: fp32 parameters (4 P), gradients (4 P), AdamW m and v (8 P);
//   under autocast every Linear weight's bf16/fp16 cast (2 P_linear), which
//   autocast's cache and the backward hold from the forward on;
// - per layer, the tensors kept for backward: the fp32 residual stream and
//   RMSNorm's fp32 intermediates, the projections' (cast) inputs, q and k
//   after RoPE, v, exp(scores) in fp32 (autocast runs exp in fp32) and the
//   softmax weights (a), SwiGLU's five d_ff-wide tensors;
// - the final norm, the loss's fp32 exp(logits), the transients of the loss
//   forward and backward, and the faithful AdamW's sqrt(v) of one parameter.
// The step's peak is the largest of its phases' (forward, backward,
// optimizer_step), each the sum of the terms alive then.
#ifndef BENCHD_COMMON_MEMORY_ESTIMATE_H_
#define BENCHD_COMMON_MEMORY_ESTIMATE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd {

// Checks the request and writes out its defaults (batch 4, context 128, fp32,
// forward, every degree 1): INVALID_ARGUMENT naming the field, what came and
// what is accepted (model.* as a benchmark's model; sharding degrees 1..,
// zero_stage 0..3, fsdp not with zero_stage 1 or 2, tensor_parallel dividing
// num_heads, d_ff and vocab_size, pipeline_stages at most num_layers).
absl::StatusOr<v1::EstimateRequest> ResolveEstimateRequest(const v1::EstimateRequest& in);

// The estimate of a resolved request. INVALID_ARGUMENT (naming batch_size and
// context_length) when a figure would pass kMaxEstimateBytes.
absl::StatusOr<v1::MemoryEstimate> EstimateMemory(const v1::EstimateRequest& resolved);

// ResolveEstimateRequest, then EstimateMemory: what Bench.Estimate answers.
absl::StatusOr<v1::MemoryEstimate> Estimate(const v1::EstimateRequest& in);

// The estimate request of a resolved benchmark step on one device (no
// sharding). `modelled` is set to "" when the estimate models the step's
// options, else to why not (an option that changes what is allocated:
// attention other than faithful, fused_ops, weight_copies, cuda_graph, or an
// optimizer other than the faithful loop).
v1::EstimateRequest EstimateRequestForStep(const v1::BenchmarkSpec& step, std::string* modelled);

// One residual-stream activation, batch x context x d_model in fp32 whatever
// the precision: under bf16/fp16 autocast the residual adds and the norms'
// inputs stay fp32 (the estimate's residual_stream term; the memory request's
// yardstick).
int64_t ResidualStreamBytes(int64_t batch, int64_t context, int64_t d_model);

}  // namespace benchd

#endif  // BENCHD_COMMON_MEMORY_ESTIMATE_H_
