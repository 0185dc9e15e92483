#include "common/attention_math.h"

namespace benchd {

int64_t PrecisionBytes(v1::Precision p) {
  return p == v1::PRECISION_BF16 || p == v1::PRECISION_FP16 ? 2 : 4;
}

int64_t AttentionHeads(const v1::AttentionSpec& spec) {
  return spec.has_num_heads() ? spec.num_heads() : 1;
}

double AttentionForwardFlops(const v1::AttentionSpec& spec) {
  const double t = static_cast<double>(spec.seq_len());
  return 4.0 * static_cast<double>(spec.batch_size()) * static_cast<double>(AttentionHeads(spec)) *
         t * t * static_cast<double>(spec.head_dim());
}

double AttentionBackwardFlops(const v1::AttentionSpec& spec) {
  return 2.0 * AttentionForwardFlops(spec);
}

double FlashForwardFlops(const v1::AttentionSpec& spec) {
  return AttentionForwardFlops(spec) * (spec.causal() ? 0.5 : 1.0);
}

double FlashBackwardFlops(const v1::AttentionSpec& spec) { return 2.5 * FlashForwardFlops(spec); }

int64_t ScoreMatrixBytes(const v1::AttentionSpec& spec) {
  return spec.batch_size() * AttentionHeads(spec) * spec.seq_len() * spec.seq_len() *
         PrecisionBytes(spec.precision());
}

SavedByFormula AttentionSavedByFormula(const v1::AttentionSpec& spec) {
  const int64_t elem = PrecisionBytes(spec.precision());
  const int64_t rows = spec.batch_size() * AttentionHeads(spec) * spec.seq_len();  // B·H·T
  const int64_t output = rows * spec.head_dim() * elem;
  SavedByFormula f;
  switch (spec.implementation()) {
    case v1::ATTENTION_IMPL_UNSPECIFIED:
    case v1::ATTENTION_IMPL_FAITHFUL:
      // The course's softmax, (x - max) -> exp -> / sum: autograd keeps the
      // exponentials (exp's result, the division's numerator), the sums (its
      // denominator), the probabilities (the weighted sum's input) and max's
      // indices; the division by sqrt(d) and the mask's `where` keep no
      // score-sized tensor (a scalar; the mask itself is made once, before).
      f.score_matrices = 2;
      f.bytes = f.score_matrices * ScoreMatrixBytes(spec) + rows * (8 + elem) + output;
      break;
    case v1::ATTENTION_IMPL_SDPA_FLASH:
    case v1::ATTENTION_IMPL_SDPA_CUDNN:
    case v1::ATTENTION_IMPL_TILED:
    case v1::ATTENTION_IMPL_FUSED:
      f.bytes = output + rows * 4;  // logsumexp (cudnn's softmax stats), fp32
      break;
    case v1::ATTENTION_IMPL_SDPA_EFFICIENT: {
      const int64_t padded = (spec.seq_len() + 31) / 32 * 32;
      f.bytes = output + spec.batch_size() * AttentionHeads(spec) * padded * 4;
      break;
    }
    default:
      break;  // sdpa (torch's pick), math: not modelled
  }
  return f;
}

}  // namespace benchd
