// `benchctl submit attention`: its flags as a JobSpec, and the result's view.
#ifndef BENCHD_CLIENT_ATTENTION_VIEW_H_
#define BENCHD_CLIENT_ATTENTION_VIEW_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "benchd/v1/bench.pb.h"

namespace benchd::client {

// Unset flags stay unset so the daemon's defaults apply (batch 8, no heads,
// head dim 64, seq 1024, fp32, faithful, 5 warm-up passes, 100 passes).
struct AttentionOptions {
  std::string device;
  std::optional<int64_t> batch_size, num_heads, head_dim, seq_len, warmup_passes, passes;
  bool causal = false;
  std::string precision;       // --precision fp32|bf16|fp16
  std::string implementation;  // --impl faithful|sdpa|flash|efficient|cudnn|math|tiled|fused
  std::optional<uint64_t> seed;
  std::string memory_cap;  // --memory-cap 2GiB (CUDA only)
  bool flush_l2 = false;   // --flush-l2
  std::string preset;      // --preset leaderboard
};

// INVALID_ARGUMENT naming the flag (--precision, --impl, --memory-cap) for
// what benchctl can tell by itself; the daemon checks ranges.
absl::StatusOr<v1::JobSpec> BuildAttentionSpec(const AttentionOptions& options);

// "faithful causal, batch 8 x seq 1024 x d 64, bf16".
std::string AttentionSpecSummary(const v1::AttentionSpec& spec);

// The cell as a one-row table (forward ms, backward ms, saved MiB, peak MiB,
// score matrix MiB by formula, TFLOP/s), then the spread and how the memory
// figures compare with the formulas.
std::string AttentionResultView(const v1::AttentionResult& result);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_ATTENTION_VIEW_H_
