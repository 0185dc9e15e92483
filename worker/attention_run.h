// The attention request (v1::AttentionSpec; docs/architecture.md "The
// attention request"): the CS336 pytorch_attention benchmark, one cell.
#ifndef BENCHD_WORKER_ATTENTION_RUN_H_
#define BENCHD_WORKER_ATTENTION_RUN_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"
#include "worker/device.h"
#include "worker/transformer.h"

namespace benchd::worker {

struct AttentionHooks {
  // After every pass (warm-up ones flagged), with the total pass count.
  std::function<void(const v1::StepTiming& timing, int64_t total_passes)> on_step;
  // Polled before every pass; true stops the run with CANCELLED.
  std::function<bool()> cancelled;
};

// `spec` must be resolved (benchd::ResolveJobSpec) and checked for the device
// (benchd::CheckKindForDevice). Draws Q, K, V and the output's gradient on the
// CPU from the seed and copies them to `dev` in the spec's precision; runs
// warm-up then measured passes, each a forward then a backward timed apart
// (CUDA events, or the host clock on a CPU), with the allocator's figures
// around them on CUDA. Returns the result, CANCELLED, INVALID_ARGUMENT when
// a forced SDPA backend or the fused kernels cannot run these inputs, RESOURCE_EXHAUSTED when the
// device (or the spec's memory cap) ran out of memory, after every tensor
// of the run is freed and cached device memory released, or INTERNAL.
// One forward of the spec's implementation on q, k, v ((B, T, d), or
// (B, H, T, d) with heads): faithful is the course's ScaledDotProductAttention
// (worker/transformer.h) with `mask` (CausalMask, or undefined without
// causal); tiled is TiledAttention; the SDPA ones go through
// SdpaCausalAttention under an SdpBackendGuard, and fused through
// FusedAttention (worker/flash/fused_attention.h), both with a head dimension
// of 1 added (a view) when there is none.
torch::Tensor AttentionForward(const v1::AttentionSpec& spec, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v,
                               const torch::Tensor& mask, CausalMaskCache* masks);

absl::StatusOr<v1::AttentionResult> RunAttention(const v1::AttentionSpec& spec,
                                                 const WorkerDevice& dev,
                                                 const AttentionHooks& hooks = {});

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_ATTENTION_RUN_H_
