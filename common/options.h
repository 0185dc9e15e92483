// The benchmark options beyond the faithful path (docs/architecture.md
// "Options"): warm-up auto, the attention and optimizer implementations, TF32,
// CUDA graphs and weight copies. Names, parsers, and the checks that do not depend on the
// device (those that do are the worker's: worker/options.h). Torch-free.
#ifndef BENCHD_COMMON_OPTIONS_H_
#define BENCHD_COMMON_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd {

// With cuda_graph, this many warm-up steps run eagerly on the capture stream
// before the capture: the first allocates what a step keeps (the AdamW state
// and its step tensors, RoPE's cos/sin table, cuBLAS's workspace for that
// stream), which must exist before capturing, as a capture records kernels
// without running them; the second is a steady-state eager step.
inline constexpr int64_t kGraphEagerSteps = 2;

// "faithful", "sdpa", "flash", "efficient", "cudnn", "math", "tiled", "fused".
std::string AttentionName(v1::AttentionImpl a);
// Every name AttentionName gives, for error messages: "faithful, sdpa, ...
// or fused" (derived from the proto's enum).
std::string AttentionChoices();
// The course's attention / AdamW: faithful, or unspecified (which means it).
inline bool IsFaithful(v1::AttentionImpl a) {
  return a == v1::ATTENTION_IMPL_UNSPECIFIED || a == v1::ATTENTION_IMPL_FAITHFUL;
}
inline bool IsFaithful(v1::OptimizerImpl o) {
  return o == v1::OPTIMIZER_IMPL_UNSPECIFIED || o == v1::OPTIMIZER_IMPL_FAITHFUL;
}
// Those names, and "sdpa_flash", "sdpa-flash", "mem_efficient", ... for the forced backends.
absl::StatusOr<v1::AttentionImpl> ParseAttention(const std::string& s);
// "faithful", "foreach", "fused".
std::string OptimizerImplName(v1::OptimizerImpl o);
absl::StatusOr<v1::OptimizerImpl> ParseOptimizerImpl(const std::string& s);

// Part of ResolveJobSpec: checks the options of `b` (`in` is the spec as it
// came, before defaults) and fills their defaults (warmup_max_steps 50 with
// warmup_auto). INVALID_ARGUMENT naming the field. Must run before the
// warm-up default is written, and the warm-up default is skipped with
// warmup_auto (ResolveJobSpec does both).
absl::Status ResolveBenchmarkOptions(const v1::BenchmarkSpec& in, v1::BenchmarkSpec& b);

}  // namespace benchd

#endif  // BENCHD_COMMON_OPTIONS_H_
