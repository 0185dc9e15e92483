// The attention request on the first GPU: the measured saved bytes against
// the formulas, a real memory cap, and the fp32 rule of the fused kernels.
// Skipped where CUDA is not available.
#include <gtest/gtest.h>

#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include "common/attention_math.h"
#include "common/job_spec.h"
#include "common/model_config.h"
#include "worker/attention_run.h"

namespace benchd::worker {
namespace {

class CudaAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    dev_ = *ParseWorkerDevice("cuda:0");
  }
  WorkerDevice dev_{"", torch::Device(torch::kCPU), ""};
};

v1::AttentionSpec Cell(v1::AttentionImpl impl, v1::Precision precision, int64_t seq) {
  v1::JobSpec job;
  v1::AttentionSpec* a = job.mutable_attention();
  a->set_batch_size(8);
  a->set_head_dim(64);
  a->set_seq_len(seq);
  a->set_causal(true);
  a->set_implementation(impl);
  a->set_precision(precision);
  a->set_warmup_passes(2);
  a->set_passes(5);
  auto resolved = ResolveJobSpec(job);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved->attention();
}

// Faithful keeps two score matrices (exponentials and probabilities): the
// allocator's count agrees with the formula within its block rounding.
TEST_F(CudaAttentionTest, FaithfulSavesTwoScoreMatricesAsTheFormulaSays) {
  for (auto precision : {v1::PRECISION_FP32, v1::PRECISION_BF16}) {
    const v1::AttentionSpec spec = Cell(v1::ATTENTION_IMPL_FAITHFUL, precision, 2048);
    auto r = RunAttention(spec, dev_);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->timer(), "cuda_event");
    EXPECT_EQ(r->memory_source(), "cuda_caching_allocator");
    const double formula = static_cast<double>(r->saved_by_formula_bytes());
    EXPECT_EQ(r->saved_score_matrices(), 2);
    EXPECT_NEAR(static_cast<double>(r->saved_activation_bytes()), formula, 0.03 * formula)
        << PrecisionName(precision);
    EXPECT_GT(r->peak_pass_bytes(), r->saved_activation_bytes());
    EXPECT_GT(r->forward().median(), 0);
    EXPECT_GT(r->backward().median(), 0);
  }
}

// Flash keeps no score matrix: the output and its logsumexp only.
TEST_F(CudaAttentionTest, FlashSavesTheOutputAndLogsumexpOnly) {
  const v1::AttentionSpec spec = Cell(v1::ATTENTION_IMPL_SDPA_FLASH, v1::PRECISION_BF16, 4096);
  auto r = RunAttention(spec, dev_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->saved_activation_bytes(), r->saved_by_formula_bytes());
  EXPECT_LE(r->saved_activation_bytes(), r->saved_by_formula_bytes() + (int64_t{2} << 20));
  EXPECT_LT(r->saved_activation_bytes(), r->score_matrix_bytes() / 10);
}

// The cap is the caching allocator's: a cell above it really runs out of
// memory, and the fraction is restored for the next cell.
TEST_F(CudaAttentionTest, AMemoryCapIsARealOutOfMemoryAndIsRestored) {
  // The allocator exists from the process's first CUDA use (ctest runs each
  // test in a fresh process): make it before reading its fraction.
  at::globalContext().lazyInitDevice(at::kCUDA);
  const double before = c10::cuda::CUDACachingAllocator::getMemoryFraction(0);
  v1::AttentionSpec spec = Cell(v1::ATTENTION_IMPL_FAITHFUL, v1::PRECISION_FP32, 4096);
  spec.set_memory_cap_bytes(int64_t{64} << 20);  // one score matrix is 512 MiB
  auto r = RunAttention(spec, dev_);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(r.status().message().find("memory cap 0.06 GiB"), std::string::npos) << r.status();
  EXPECT_DOUBLE_EQ(c10::cuda::CUDACachingAllocator::getMemoryFraction(0), before);
  spec.clear_memory_cap_bytes();
  EXPECT_TRUE(RunAttention(spec, dev_).ok());
}

TEST_F(CudaAttentionTest, FusedKernelsInFp32AreRefusedNamingTheField) {
  auto r = RunAttention(Cell(v1::ATTENTION_IMPL_SDPA_FLASH, v1::PRECISION_FP32, 256), dev_);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("attention.implementation"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace benchd::worker
