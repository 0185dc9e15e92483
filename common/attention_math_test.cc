#include "common/attention_math.h"

#include <gtest/gtest.h>

namespace benchd {
namespace {

v1::AttentionSpec Spec(int64_t batch, int64_t seq, int64_t d, v1::Precision p,
                       v1::AttentionImpl impl) {
  v1::AttentionSpec s;
  s.set_batch_size(batch);
  s.set_seq_len(seq);
  s.set_head_dim(d);
  s.set_precision(p);
  s.set_implementation(impl);
  return s;
}

TEST(AttentionMathTest, FlopsAreFourBHTSquaredDAndBackwardTwice) {
  v1::AttentionSpec s = Spec(8, 1024, 64, v1::PRECISION_FP32, v1::ATTENTION_IMPL_FAITHFUL);
  EXPECT_DOUBLE_EQ(AttentionForwardFlops(s), 4.0 * 8 * 1024 * 1024 * 64);
  EXPECT_DOUBLE_EQ(AttentionBackwardFlops(s), 8.0 * 8 * 1024 * 1024 * 64);
  s.set_num_heads(12);
  EXPECT_DOUBLE_EQ(AttentionForwardFlops(s), 4.0 * 8 * 12 * 1024 * 1024 * 64);
  s.set_causal(true);  // dense work either way
  EXPECT_DOUBLE_EQ(AttentionForwardFlops(s), 4.0 * 8 * 12 * 1024 * 1024 * 64);
}

TEST(AttentionMathTest, ScoreMatrixIsBHTSquaredTimesElementSize) {
  // The course's largest cell: batch 8, T 16384, fp32: 8 GiB per matrix.
  v1::AttentionSpec s = Spec(8, 16384, 16, v1::PRECISION_FP32, v1::ATTENTION_IMPL_FAITHFUL);
  EXPECT_EQ(ScoreMatrixBytes(s), int64_t{8} << 30);
  s.set_precision(v1::PRECISION_BF16);
  EXPECT_EQ(ScoreMatrixBytes(s), int64_t{4} << 30);
  s.set_num_heads(2);
  EXPECT_EQ(ScoreMatrixBytes(s), int64_t{8} << 30);
}

TEST(AttentionMathTest, FaithfulKeepsTwoScoreMatricesAndTheRowStatistics) {
  const v1::AttentionSpec s = Spec(2, 128, 16, v1::PRECISION_FP32, v1::ATTENTION_IMPL_FAITHFUL);
  const SavedByFormula f = AttentionSavedByFormula(s);
  EXPECT_EQ(f.score_matrices, 2);
  // exp + probabilities, max indices (int64) and sums (fp32), output.
  EXPECT_EQ(f.bytes, 2 * (2 * 128 * 128 * 4) + 2 * 128 * (8 + 4) + 2 * 128 * 16 * 4);
}

TEST(AttentionMathTest, FusedKernelsKeepTheOutputAndAnFp32Logsumexp) {
  v1::AttentionSpec s = Spec(2, 100, 64, v1::PRECISION_BF16, v1::ATTENTION_IMPL_SDPA_FLASH);
  s.set_num_heads(4);
  EXPECT_EQ(AttentionSavedByFormula(s).score_matrices, 0);
  EXPECT_EQ(AttentionSavedByFormula(s).bytes, 2 * 4 * 100 * 64 * 2 + 2 * 4 * 100 * 4);
  s.set_implementation(v1::ATTENTION_IMPL_SDPA_EFFICIENT);  // T padded to 128
  EXPECT_EQ(AttentionSavedByFormula(s).bytes, 2 * 4 * 100 * 64 * 2 + 2 * 4 * 128 * 4);
  s.set_implementation(v1::ATTENTION_IMPL_SDPA_MATH);  // not modelled
  EXPECT_EQ(AttentionSavedByFormula(s).bytes, 0);
}

}  // namespace
}  // namespace benchd
