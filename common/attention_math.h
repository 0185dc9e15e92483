// The attention request's figures by formula (v1::AttentionResult): FLOPs of
// a pass and the bytes of the score matrices and of what a backward needs.
// Torch-free, so the daemon's tests and the worker share one definition.
#ifndef BENCHD_COMMON_ATTENTION_MATH_H_
#define BENCHD_COMMON_ATTENTION_MATH_H_

#include <cstdint>

#include "benchd/v1/bench.pb.h"

namespace benchd {

// Bytes of one element in `p`: 4 for fp32 (and unspecified), 2 for bf16/fp16.
int64_t PrecisionBytes(v1::Precision p);

// Heads of a resolved spec: num_heads, or 1 when it has no head dimension.
int64_t AttentionHeads(const v1::AttentionSpec& spec);

// 4·B·H·T²·d: QKᵀ and the weighted sum, 2 FLOPs per multiply-add. Dense
// work, causal or not (the course's implementation computes the whole matrix).
double AttentionForwardFlops(const v1::AttentionSpec& spec);
// 2x the forward: each matmul's backward is two matmuls of its size.
double AttentionBackwardFlops(const v1::AttentionSpec& spec);
// As FlashAttention's benchmarks (and the CS336 leaderboard) count them: the
// forward halved when causal, the backward 2.5x the forward.
double FlashForwardFlops(const v1::AttentionSpec& spec);
double FlashBackwardFlops(const v1::AttentionSpec& spec);

// B·H·T² elements of the precision's size.
int64_t ScoreMatrixBytes(const v1::AttentionSpec& spec);

// What the implementation keeps for the backward, by formula (see
// AttentionResult.saved_score_matrices and saved_by_formula_bytes).
struct SavedByFormula {
  int64_t score_matrices = 0;
  int64_t bytes = 0;  // 0: not modelled (sdpa, math)
};
SavedByFormula AttentionSavedByFormula(const v1::AttentionSpec& spec);

}  // namespace benchd

#endif  // BENCHD_COMMON_ATTENTION_MATH_H_
