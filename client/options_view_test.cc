// benchctl's option flags (spec_builder) and how `get` shows the options.
#include "client/options_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/job_view.h"
#include "client/spec_builder.h"
#include "client/test_job.h"
#include "common/options.h"

namespace benchd::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(OptionFlags, FillTheSpec) {
  BenchmarkOptions o;
  o.warmup = "auto";
  o.warmup_max_steps = 20;
  o.attention = "flash";
  o.optimizer = "foreach";
  o.allow_tf32 = true;
  o.cuda_graph = true;
  o.weight_copies = true;
  o.fused_ops = true;
  o.optimizer_overlap = true;
  o.autograd = true;
  auto spec = BuildBenchmarkSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::BenchmarkSpec& b = spec->benchmark();
  EXPECT_TRUE(b.warmup_auto());
  EXPECT_FALSE(b.has_warmup_steps());
  EXPECT_EQ(b.warmup_max_steps(), 20);
  EXPECT_EQ(b.attention(), v1::ATTENTION_IMPL_SDPA_FLASH);
  EXPECT_EQ(b.optimizer_impl(), v1::OPTIMIZER_IMPL_FOREACH);
  EXPECT_TRUE(b.allow_tf32());
  EXPECT_TRUE(b.cuda_graph());
  EXPECT_TRUE(b.weight_copies());
  EXPECT_TRUE(b.fused_ops());
  EXPECT_TRUE(b.optimizer_overlap());
  EXPECT_TRUE(b.autograd());
}

TEST(OptionFlags, UnsetMeansFaithful) {
  auto spec = BuildBenchmarkSpec({});
  ASSERT_TRUE(spec.ok());
  const v1::BenchmarkSpec& b = spec->benchmark();
  EXPECT_FALSE(b.warmup_auto());
  EXPECT_FALSE(b.has_warmup_max_steps());
  EXPECT_TRUE(IsFaithful(b.attention())) << v1::AttentionImpl_Name(b.attention());
  EXPECT_TRUE(IsFaithful(b.optimizer_impl())) << v1::OptimizerImpl_Name(b.optimizer_impl());
  EXPECT_FALSE(b.allow_tf32());
  EXPECT_FALSE(b.cuda_graph());
  EXPECT_FALSE(b.weight_copies());
  EXPECT_FALSE(b.fused_ops());
  EXPECT_FALSE(b.optimizer_overlap());
  EXPECT_FALSE(b.autograd());
}

TEST(OptionFlags, WarmupTakesAutoOrACount) {
  BenchmarkOptions o;
  o.warmup = "7";
  auto spec = BuildBenchmarkSpec(o);
  ASSERT_TRUE(spec.ok());
  EXPECT_FALSE(spec->benchmark().warmup_auto());
  EXPECT_EQ(spec->benchmark().warmup_steps(), 7);
  o.warmup = "AUTO";
  EXPECT_TRUE(BuildBenchmarkSpec(o)->benchmark().warmup_auto());
  o.warmup = "0";
  spec = BuildBenchmarkSpec(o);
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(spec->benchmark().has_warmup_steps());
  EXPECT_EQ(spec->benchmark().warmup_steps(), 0);
}

TEST(OptionFlags, BadValuesNameTheFlag) {
  struct Case {
    void (*set)(BenchmarkOptions&);
    const char* message;
  };
  const Case cases[] = {
      {[](BenchmarkOptions& o) { o.warmup = "sometimes"; },
       "--warmup: expected auto or a number of steps (0 or more), got 'sometimes'"},
      {[](BenchmarkOptions& o) { o.warmup = "-2"; }, "--warmup: expected auto"},
      {[](BenchmarkOptions& o) {
         o.warmup = "auto";
         o.warmup_steps = 3;
       },
       "--warmup: give --warmup (auto or N) or --warmup-steps N, not both"},
      {[](BenchmarkOptions& o) { o.attention = "flashy"; },
       "--attention: unknown attention 'flashy'; expected faithful, sdpa, flash, efficient, cudnn, "
       "math, tiled or fused"},
      {[](BenchmarkOptions& o) { o.optimizer = "lion"; },
       "--optimizer: unknown optimizer 'lion'; expected faithful, foreach or fused"},
  };
  for (const Case& c : cases) {
    BenchmarkOptions o;
    c.set(o);
    auto spec = BuildBenchmarkSpec(o);
    ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(c.message));
  }
}

TEST(OptionsView, FaithfulByDefault) {
  v1::Job job = testing::MakeSucceededJob();
  const std::string view = JobView(job);
  EXPECT_THAT(view, HasSubstr("Steps        1 warm-up + 2 measured\n"));
  EXPECT_THAT(view, HasSubstr("Options      faithful (course attention and AdamW, fp32 matmuls, "
                              "eager, explicit backward)\n"));
  job.mutable_result()->mutable_benchmark()->mutable_spec()->set_autograd(true);
  job.mutable_spec()->mutable_benchmark()->set_autograd(true);
  EXPECT_THAT(JobView(job), HasSubstr("Options      faithful (course attention and AdamW, fp32 "
                                      "matmuls, eager, autograd engine)\n"));
  EXPECT_THAT(JobView(job), HasSubstr("seed 0, autograd"));
  EXPECT_THAT(view, Not(HasSubstr("warm-up auto")));
}

TEST(OptionsView, ShowsTheOptionsAndTheAutoWarmupOutcome) {
  v1::Job job = testing::MakeSucceededJob();
  v1::BenchmarkSpec* spec = job.mutable_spec()->mutable_benchmark();
  spec->clear_warmup_steps();
  spec->set_warmup_auto(true);
  spec->set_warmup_max_steps(50);
  spec->set_attention(v1::ATTENTION_IMPL_SDPA_MATH);
  spec->set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
  spec->set_allow_tf32(true);
  v1::BenchmarkResult* result = job.mutable_result()->mutable_benchmark();
  v1::BenchmarkSpec* r = result->mutable_spec();  // the resolved spec the worker ran
  result->set_warmup_steps_run(7);
  r->clear_warmup_steps();  // warm-up auto keeps the rule and its cap
  r->set_warmup_auto(true);
  result->set_warmup_converged(true);
  r->set_warmup_max_steps(50);
  r->set_attention(v1::ATTENTION_IMPL_SDPA_MATH);
  r->set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
  r->set_allow_tf32(true);
  r->set_autograd(true);  // SDPA is not the course's attention: autograd runs it
  std::string view = JobView(job);
  EXPECT_THAT(view, HasSubstr("warm-up auto (max 50), steps 2, seed 0, attention math, optimizer "
                              "fused, tf32"));
  EXPECT_THAT(view, HasSubstr("Steps        7 warm-up (auto: last 3 within 2% of their median, "
                              "cap 50) + 2 measured\n"));
  EXPECT_THAT(view, HasSubstr("Options      attention sdpa (math only), optimizer fused, tf32 "
                              "matmuls, autograd engine\n"));
  r->set_attention(v1::ATTENTION_IMPL_TILED);
  EXPECT_THAT(JobView(job),
              HasSubstr("Options      attention tiled (FlashAttention-2's algorithm in "
                        "ATen ops), optimizer fused"));
  r->set_attention(v1::ATTENTION_IMPL_FUSED);
  EXPECT_THAT(JobView(job),
              HasSubstr("Options      attention fused (benchd's FlashAttention-2 CUDA kernels), "
                        "optimizer fused"));
  r->set_attention(v1::ATTENTION_IMPL_SDPA_MATH);

  result->set_warmup_converged(false);
  result->set_warmup_steps_run(50);
  r->set_cuda_graph(true);
  result->set_graph_eager_steps(2);
  r->set_attention(v1::ATTENTION_IMPL_SDPA);
  view = JobView(job);
  EXPECT_THAT(view, HasSubstr("50 warm-up (auto: capped before converging, cap 50) + 2 measured; "
                              "the first 2 eager, then CUDA-graph replays\n"));
  EXPECT_THAT(view, HasSubstr("attention sdpa (PyTorch picks the kernel)"));
  EXPECT_THAT(view, HasSubstr("cuda graph of forward+backward, optimizer eager after each replay"));

  spec->set_weight_copies(true);
  r->set_weight_copies(true);
  r->set_precision(v1::PRECISION_BF16);
  view = JobView(job);
  EXPECT_THAT(view, HasSubstr("tf32, weight copies"));
  EXPECT_THAT(view, HasSubstr("bf16 weight copies kept between steps, autograd engine\n"));
  spec->set_fused_ops(true);
  r->set_fused_ops(true);
  view = JobView(job);
  EXPECT_THAT(view, HasSubstr("weight copies, fused ops"));
  EXPECT_THAT(view, HasSubstr("bf16 weight copies kept between steps, fused RMSNorm, SiLU and "
                              "RoPE, autograd engine\n"));
}

}  // namespace
}  // namespace benchd::client
