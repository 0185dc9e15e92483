// The options' names, parsers and checks, through ResolveJobSpec as the
// daemon and the worker call it.
#include "common/options.h"

#include <string>

#include "absl/status/status.h"
#include "common/job_spec.h"
#include "gtest/gtest.h"

namespace benchd {
namespace {

using ::testing::IsSubstring;

v1::JobSpec Tiny(v1::BenchmarkMode mode = v1::BENCHMARK_MODE_FORWARD) {
  v1::JobSpec spec;
  spec.mutable_benchmark()->mutable_model()->set_preset("tiny");
  spec.mutable_benchmark()->set_mode(mode);
  return spec;
}

// The status's message, for EXPECT_PRED_FORMAT2(IsSubstring, ...).
std::string StatusMessage(const absl::StatusOr<v1::JobSpec>& s) {
  return std::string(s.status().message());
}

TEST(OptionsTest, DefaultsAreTheFaithfulPath) {
  auto out = ResolveJobSpec(Tiny());
  ASSERT_TRUE(out.ok()) << out.status();
  const v1::BenchmarkSpec& b = out->benchmark();
  EXPECT_FALSE(b.warmup_auto());
  EXPECT_FALSE(b.has_warmup_max_steps());
  EXPECT_EQ(b.warmup_steps(), 5);
  EXPECT_EQ(b.attention(), v1::ATTENTION_IMPL_FAITHFUL);
  // Forward runs no optimizer: the resolved spec names none.
  EXPECT_EQ(b.optimizer_impl(), v1::OPTIMIZER_IMPL_UNSPECIFIED);
  EXPECT_FALSE(b.allow_tf32());
  EXPECT_FALSE(b.cuda_graph());
  v1::JobSpec train = Tiny();
  train.mutable_benchmark()->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  EXPECT_EQ(ResolveJobSpec(train)->benchmark().optimizer_impl(), v1::OPTIMIZER_IMPL_FAITHFUL);
  // Faithful, asked for outside train_step, is the default written out as none.
  v1::JobSpec forward = Tiny();
  forward.mutable_benchmark()->set_optimizer_impl(v1::OPTIMIZER_IMPL_FAITHFUL);
  EXPECT_EQ(ResolveJobSpec(forward)->benchmark().optimizer_impl(), v1::OPTIMIZER_IMPL_UNSPECIFIED);
}

TEST(OptionsTest, WarmupAutoGetsItsCapAndNoCount) {
  v1::JobSpec in = Tiny();
  in.mutable_benchmark()->set_warmup_auto(true);
  auto out = ResolveJobSpec(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->benchmark().warmup_auto());
  EXPECT_FALSE(out->benchmark().has_warmup_steps());
  ASSERT_TRUE(out->benchmark().has_warmup_max_steps());
  EXPECT_EQ(out->benchmark().warmup_max_steps(), 50);
  // The worker resolves the resolved spec again: it must still pass, unchanged.
  auto again = ResolveJobSpec(*out);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), out->SerializeAsString());

  in.mutable_benchmark()->set_warmup_max_steps(3);
  out = ResolveJobSpec(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->benchmark().warmup_max_steps(), 3);
}

TEST(OptionsTest, WarmupAutoWithAnExplicitCountIsAContradiction) {
  for (int64_t n : {0, 5}) {
    v1::JobSpec in = Tiny();
    in.mutable_benchmark()->set_warmup_auto(true);
    in.mutable_benchmark()->set_warmup_steps(n);
    auto out = ResolveJobSpec(in);
    ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_PRED_FORMAT2(IsSubstring, "benchmark.warmup_auto: contradicts", StatusMessage(out));
    EXPECT_PRED_FORMAT2(IsSubstring, "warmup_steps", StatusMessage(out));
  }
}

TEST(OptionsTest, BadOptionsNameTheirField) {
  struct Case {
    const char* field;
    v1::BenchmarkMode mode;
    void (*set)(v1::BenchmarkSpec*);
  };
  const Case cases[] = {
      {"benchmark.warmup_max_steps: expected 3..100000, got 2", v1::BENCHMARK_MODE_FORWARD,
       [](v1::BenchmarkSpec* b) {
         b->set_warmup_auto(true);
         b->set_warmup_max_steps(2);
       }},
      {"benchmark.warmup_max_steps: expected 3..100000, got 100001", v1::BENCHMARK_MODE_FORWARD,
       [](v1::BenchmarkSpec* b) {
         b->set_warmup_auto(true);
         b->set_warmup_max_steps(kMaxSteps + 1);
       }},
      {"benchmark.warmup_max_steps: applies only with warmup_auto", v1::BENCHMARK_MODE_FORWARD,
       [](v1::BenchmarkSpec* b) { b->set_warmup_max_steps(10); }},
      {"benchmark.attention: unknown value 42", v1::BENCHMARK_MODE_FORWARD,
       [](v1::BenchmarkSpec* b) { b->set_attention(static_cast<v1::AttentionImpl>(42)); }},
      {"benchmark.optimizer_impl: unknown value 7", v1::BENCHMARK_MODE_TRAIN_STEP,
       [](v1::BenchmarkSpec* b) { b->set_optimizer_impl(static_cast<v1::OptimizerImpl>(7)); }},
      {"benchmark.optimizer_impl: foreach changes the AdamW step, which only mode train_step "
       "runs; mode is forward_backward",
       v1::BENCHMARK_MODE_FORWARD_BACKWARD,
       [](v1::BenchmarkSpec* b) { b->set_optimizer_impl(v1::OPTIMIZER_IMPL_FOREACH); }},
      {"benchmark.warmup_steps: cuda_graph needs at least 2 warm-up steps",
       v1::BENCHMARK_MODE_FORWARD,
       [](v1::BenchmarkSpec* b) {
         b->set_cuda_graph(true);
         b->set_warmup_steps(1);
       }},
      {"benchmark.weight_copies: keeps the matmul weights in the autocast dtype, so it needs "
       "precision bf16 or fp16; precision is fp32",
       v1::BENCHMARK_MODE_FORWARD, [](v1::BenchmarkSpec* b) { b->set_weight_copies(true); }},
      {"benchmark.weight_copies: in train_step the fp32 weights are updated from the copies' "
       "gradients by the fused optimizer only; set optimizer_impl fused (got foreach)",
       v1::BENCHMARK_MODE_TRAIN_STEP,
       [](v1::BenchmarkSpec* b) {
         b->set_precision(v1::PRECISION_BF16);
         b->set_weight_copies(true);
         b->set_optimizer_impl(v1::OPTIMIZER_IMPL_FOREACH);
       }},
      {"set optimizer_impl fused (got faithful)", v1::BENCHMARK_MODE_TRAIN_STEP,
       [](v1::BenchmarkSpec* b) {
         b->set_precision(v1::PRECISION_FP16);
         b->set_weight_copies(true);
       }},
      {"benchmark.warmup_max_steps: with cuda_graph", v1::BENCHMARK_MODE_FORWARD,
       [](v1::BenchmarkSpec* b) {
         b->set_cuda_graph(true);
         b->set_warmup_auto(true);
         b->set_warmup_max_steps(4);
       }},
  };
  for (const Case& c : cases) {
    v1::JobSpec in = Tiny(c.mode);
    c.set(in.mutable_benchmark());
    auto out = ResolveJobSpec(in);
    ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_PRED_FORMAT2(IsSubstring, c.field, StatusMessage(out));
  }
}

TEST(OptionsTest, GoodCombinationsPass) {
  v1::JobSpec in = Tiny(v1::BENCHMARK_MODE_TRAIN_STEP);
  v1::BenchmarkSpec* b = in.mutable_benchmark();
  b->set_warmup_auto(true);
  b->set_warmup_max_steps(5);
  b->set_attention(v1::ATTENTION_IMPL_SDPA_FLASH);
  b->set_optimizer_impl(v1::OPTIMIZER_IMPL_FOREACH);
  b->set_allow_tf32(true);
  b->set_cuda_graph(true);
  auto out = ResolveJobSpec(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->benchmark().attention(), v1::ATTENTION_IMPL_SDPA_FLASH);
  EXPECT_EQ(out->benchmark().optimizer_impl(), v1::OPTIMIZER_IMPL_FOREACH);

  // cuda_graph in forward mode takes any warm-up of 2 or more and no optimizer choice.
  v1::JobSpec fwd = Tiny();
  fwd.mutable_benchmark()->set_cuda_graph(true);
  fwd.mutable_benchmark()->set_warmup_steps(2);
  EXPECT_TRUE(ResolveJobSpec(fwd).ok());
  // fused in train_step without a graph.
  v1::JobSpec fused = Tiny(v1::BENCHMARK_MODE_TRAIN_STEP);
  fused.mutable_benchmark()->set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
  EXPECT_TRUE(ResolveJobSpec(fused).ok());
  // Weight copies: bf16 or fp16, any mode; train_step with fused, under a graph too.
  fused.mutable_benchmark()->set_precision(v1::PRECISION_BF16);
  fused.mutable_benchmark()->set_weight_copies(true);
  fused.mutable_benchmark()->set_cuda_graph(true);
  EXPECT_TRUE(ResolveJobSpec(fused).ok());
  for (auto mode : {v1::BENCHMARK_MODE_FORWARD, v1::BENCHMARK_MODE_FORWARD_BACKWARD}) {
    v1::JobSpec copies = Tiny(mode);
    copies.mutable_benchmark()->set_precision(v1::PRECISION_FP16);
    copies.mutable_benchmark()->set_weight_copies(true);
    auto resolved = ResolveJobSpec(copies);
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    EXPECT_TRUE(resolved->benchmark().weight_copies());
  }
}

TEST(OptionsTest, NamesAndParsersRoundTrip) {
  // Every value of the proto's enum: a new one without a name fails here.
  const auto* e = v1::AttentionImpl_descriptor();
  for (int i = 0; i < e->value_count(); ++i) {
    const auto a = static_cast<v1::AttentionImpl>(e->value(i)->number());
    if (a == v1::ATTENTION_IMPL_UNSPECIFIED) continue;
    auto parsed = ParseAttention(AttentionName(a));
    ASSERT_TRUE(parsed.ok()) << AttentionName(a);
    EXPECT_EQ(*parsed, a);
    EXPECT_NE(AttentionChoices().find(AttentionName(a)), std::string::npos) << AttentionName(a);
  }
  EXPECT_EQ(AttentionChoices(), "faithful, sdpa, flash, efficient, cudnn, math, tiled or fused");
  EXPECT_EQ(*ParseAttention("flash_attention_2"), v1::ATTENTION_IMPL_TILED);
  EXPECT_EQ(*ParseAttention("Fused"), v1::ATTENTION_IMPL_FUSED);
  EXPECT_EQ(AttentionName(v1::ATTENTION_IMPL_FUSED), "fused");
  EXPECT_EQ(AttentionName(v1::ATTENTION_IMPL_SDPA_EFFICIENT), "efficient");
  EXPECT_EQ(*ParseAttention("SDPA-Flash"), v1::ATTENTION_IMPL_SDPA_FLASH);
  EXPECT_EQ(*ParseAttention("mem_efficient"), v1::ATTENTION_IMPL_SDPA_EFFICIENT);
  EXPECT_EQ(*ParseAttention("sdpa_math"), v1::ATTENTION_IMPL_SDPA_MATH);
  for (auto o :
       {v1::OPTIMIZER_IMPL_FAITHFUL, v1::OPTIMIZER_IMPL_FOREACH, v1::OPTIMIZER_IMPL_FUSED}) {
    auto parsed = ParseOptimizerImpl(OptimizerImplName(o));
    ASSERT_TRUE(parsed.ok()) << OptimizerImplName(o);
    EXPECT_EQ(*parsed, o);
  }
  auto bad = ParseAttention("sdpa_");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "attention: unknown attention 'sdpa_'; expected faithful",
                      std::string(bad.status().message()));
  auto bad_opt = ParseOptimizerImpl("apex");
  EXPECT_PRED_FORMAT2(IsSubstring, "optimizer: unknown optimizer 'apex'; expected faithful",
                      std::string(bad_opt.status().message()));
}

}  // namespace
}  // namespace benchd
