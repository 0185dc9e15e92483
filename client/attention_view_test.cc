#include "client/attention_view.h"

#include "gtest/gtest.h"

namespace benchd::client {
namespace {

TEST(AttentionViewTest, SpecFromFlags) {
  AttentionOptions o;
  o.device = "cuda:0";
  o.head_dim = 64;
  o.seq_len = 1024;
  o.implementation = "flash";
  o.precision = "bf16";
  o.causal = true;
  o.passes = 20;
  o.memory_cap = "2GiB";
  auto spec = BuildAttentionSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->device(), "cuda:0");
  const v1::AttentionSpec& a = spec->attention();
  EXPECT_EQ(a.head_dim(), 64);
  EXPECT_EQ(a.seq_len(), 1024);
  EXPECT_EQ(a.implementation(), v1::ATTENTION_IMPL_SDPA_FLASH);
  EXPECT_EQ(a.precision(), v1::PRECISION_BF16);
  EXPECT_TRUE(a.causal());
  EXPECT_EQ(a.passes(), 20);
  EXPECT_EQ(a.memory_cap_bytes(), int64_t{2} << 30);
  // Unset flags stay unset: the daemon writes its defaults.
  EXPECT_FALSE(a.has_batch_size());
  EXPECT_FALSE(a.has_num_heads());
  EXPECT_FALSE(a.has_warmup_passes());
}

TEST(AttentionViewTest, BadFlagsAreNamed) {
  AttentionOptions o;
  o.implementation = "fast";
  auto s = BuildAttentionSpec(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--impl: unknown value 'fast'"), std::string::npos)
      << s.status();
  o.implementation.clear();
  o.precision = "fp8";
  s = BuildAttentionSpec(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--precision: unknown value 'fp8'"), std::string::npos)
      << s.status();
  o.precision.clear();
  o.memory_cap = "lots";
  s = BuildAttentionSpec(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--memory-cap"), std::string::npos) << s.status();
}

v1::AttentionResult Result(const std::string& memory_source) {
  v1::AttentionResult r;
  v1::AttentionSpec* s = r.mutable_spec();
  s->set_batch_size(8);
  s->set_head_dim(64);
  s->set_seq_len(1024);
  s->set_precision(v1::PRECISION_BF16);
  s->set_implementation(v1::ATTENTION_IMPL_FAITHFUL);
  s->set_causal(true);
  r.mutable_forward()->set_median(0.00123456);
  r.mutable_forward()->set_count(100);
  r.mutable_backward()->set_median(0.00234567);
  r.set_forward_tflops_per_second(1.74);
  r.set_backward_tflops_per_second(1.83);
  r.set_memory_source(memory_source);
  r.set_saved_activation_bytes(int64_t{33} << 20);
  r.set_peak_pass_bytes(int64_t{80} << 20);
  r.set_score_matrix_bytes(int64_t{16} << 20);
  r.set_saved_score_matrices(2);
  r.set_saved_by_formula_bytes(int64_t{33} << 20);
  return r;
}

TEST(AttentionViewTest, TableHasTheWriteUpsColumns) {
  const std::string view = AttentionResultView(Result("cuda_caching_allocator"));
  for (const char* column : {"forward ms", "backward ms", "saved MiB", "peak MiB",
                             "score MiB (formula)", "fwd TFLOP/s", "bwd TFLOP/s"}) {
    EXPECT_NE(view.find(column), std::string::npos) << column << " in\n" << view;
  }
  EXPECT_NE(view.find("faithful causal  bf16"), std::string::npos) << view;
  EXPECT_NE(view.find("1.235"), std::string::npos) << view;  // forward ms
  EXPECT_NE(view.find("2.346"), std::string::npos) << view;  // backward ms
  EXPECT_NE(view.find("80.0"), std::string::npos) << view;   // peak MiB
  EXPECT_NE(view.find("33.0 MiB measured; 33.0 MiB by formula (2 score matrices of 16.0 MiB"),
            std::string::npos)
      << view;
}

TEST(AttentionViewTest, ANoisyPassIsWarnedOf) {
  v1::AttentionResult r = Result("cuda_caching_allocator");
  EXPECT_EQ(AttentionResultView(r).find("Warning"), std::string::npos);
  r.mutable_backward()->set_noise_warning("interquartile range is 12.0% of the median (over 10%)");
  EXPECT_NE(AttentionResultView(r).find("backward: interquartile range is 12.0% of the median"),
            std::string::npos)
      << AttentionResultView(r);
}

TEST(AttentionViewTest, ACpuSaysItsMemoryWasNotMeasured) {
  const std::string view = AttentionResultView(Result("unavailable on cpu"));
  EXPECT_NE(view.find("n/a"), std::string::npos) << view;
  EXPECT_NE(view.find("not measured (unavailable on cpu)"), std::string::npos) << view;
  EXPECT_EQ(view.find("33.0 MiB measured"), std::string::npos) << view;
}

TEST(AttentionViewTest, SpecSummary) {
  v1::AttentionSpec s = Result("").spec();
  EXPECT_EQ(AttentionSpecSummary(s), "faithful causal, batch 8 x seq 1024 x d 64, bf16");
  s.set_num_heads(4);
  s.set_causal(false);
  EXPECT_EQ(AttentionSpecSummary(s), "faithful, batch 8 x 4 heads x seq 1024 x d 64, bf16");
  s.set_seq_len(0);  // a sweep over seq_len: each cell has its own
  EXPECT_EQ(AttentionSpecSummary(s), "faithful, batch 8 x 4 heads x seq per cell x d 64, bf16");
}

}  // namespace
}  // namespace benchd::client
