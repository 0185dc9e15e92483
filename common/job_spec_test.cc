#include "common/job_spec.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace benchd {
namespace {

using ::testing::IsSubstring;

v1::JobSpec Benchmark(const std::string& preset = "tiny") {
  v1::JobSpec spec;
  spec.mutable_benchmark()->mutable_model()->set_preset(preset);
  return spec;
}

TEST(JobSpecTest, DefaultsFilled) {
  auto out = ResolveJobSpec(Benchmark());
  ASSERT_TRUE(out.ok()) << out.status();
  const v1::BenchmarkSpec& b = out->benchmark();
  EXPECT_EQ(b.mode(), v1::MODE_FORWARD);
  EXPECT_EQ(b.precision(), v1::PRECISION_FP32);
  EXPECT_EQ(b.batch_size(), 4);
  EXPECT_EQ(b.context_length(), 128);
  // Written out, so a reader of the stored spec sees what ran.
  EXPECT_TRUE(b.has_batch_size());
  EXPECT_TRUE(b.has_context_length());
  EXPECT_TRUE(b.has_measure_steps());
  ASSERT_TRUE(b.has_warmup_steps());
  EXPECT_EQ(b.warmup_steps(), 5);
  EXPECT_EQ(b.measure_steps(), 10);
  EXPECT_EQ(b.seed(), 0u);
  // The model comes back resolved.
  EXPECT_EQ(b.model().d_model(), 64);
  EXPECT_DOUBLE_EQ(b.model().rope_theta(), 10000.0);
}

TEST(JobSpecTest, ExplicitValuesKept) {
  v1::JobSpec in = Benchmark();
  in.set_device("cuda:1");
  v1::BenchmarkSpec* b = in.mutable_benchmark();
  b->set_mode(v1::MODE_TRAIN_STEP);
  b->set_precision(v1::PRECISION_BF16);
  b->set_batch_size(8);
  b->set_context_length(256);
  b->set_warmup_steps(2);
  b->set_measure_steps(3);
  b->set_seed(42);
  auto out = ResolveJobSpec(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->device(), "cuda:1");
  EXPECT_EQ(out->benchmark().mode(), v1::MODE_TRAIN_STEP);
  EXPECT_EQ(out->benchmark().precision(), v1::PRECISION_BF16);
  EXPECT_EQ(out->benchmark().batch_size(), 8);
  EXPECT_EQ(out->benchmark().context_length(), 256);
  EXPECT_EQ(out->benchmark().warmup_steps(), 2);
  EXPECT_EQ(out->benchmark().measure_steps(), 3);
  EXPECT_EQ(out->benchmark().seed(), 42u);
}

// warmup_steps is `optional`: an explicit 0 means "no warm-up", not "default".
TEST(JobSpecTest, ExplicitZeroWarmupKept) {
  v1::JobSpec in = Benchmark();
  in.mutable_benchmark()->set_warmup_steps(0);
  auto out = ResolveJobSpec(in);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->benchmark().has_warmup_steps());
  EXPECT_EQ(out->benchmark().warmup_steps(), 0);
}

TEST(JobSpecTest, OutOfRangeFieldsNamed) {
  struct Case {
    const char* field;
    void (*set)(v1::BenchmarkSpec*);
  };
  const Case cases[] = {
      // The sizes are `optional`: an explicit 0 is a value, refused, not "default".
      {"benchmark.batch_size", [](v1::BenchmarkSpec* b) { b->set_batch_size(0); }},
      {"benchmark.context_length", [](v1::BenchmarkSpec* b) { b->set_context_length(0); }},
      {"benchmark.measure_steps", [](v1::BenchmarkSpec* b) { b->set_measure_steps(0); }},
      {"benchmark.batch_size", [](v1::BenchmarkSpec* b) { b->set_batch_size(-1); }},
      {"benchmark.batch_size", [](v1::BenchmarkSpec* b) { b->set_batch_size(kMaxBatch + 1); }},
      {"benchmark.context_length", [](v1::BenchmarkSpec* b) { b->set_context_length(-5); }},
      {"benchmark.context_length",
       [](v1::BenchmarkSpec* b) { b->set_context_length(kMaxContext + 1); }},
      {"benchmark.warmup_steps", [](v1::BenchmarkSpec* b) { b->set_warmup_steps(-1); }},
      {"benchmark.warmup_steps",
       [](v1::BenchmarkSpec* b) { b->set_warmup_steps(kMaxSteps + 1); }},
      {"benchmark.measure_steps", [](v1::BenchmarkSpec* b) { b->set_measure_steps(-3); }},
      {"benchmark.measure_steps",
       [](v1::BenchmarkSpec* b) { b->set_measure_steps(kMaxSteps + 1); }},
      {"benchmark.mode",
       [](v1::BenchmarkSpec* b) { b->set_mode(static_cast<v1::BenchmarkMode>(99)); }},
      {"benchmark.precision",
       [](v1::BenchmarkSpec* b) { b->set_precision(static_cast<v1::Precision>(99)); }},
      {"benchmark.model.preset",
       [](v1::BenchmarkSpec* b) { b->mutable_model()->set_preset("nope"); }},
      {"benchmark.model.num_heads",
       [](v1::BenchmarkSpec* b) { b->mutable_model()->set_num_heads(3); }},
  };
  for (const Case& c : cases) {
    v1::JobSpec in = Benchmark();
    c.set(in.mutable_benchmark());
    auto out = ResolveJobSpec(in);
    ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_PRED_FORMAT2(IsSubstring, c.field, std::string(out.status().message()));
  }
}

TEST(JobSpecTest, LimitsThemselvesAccepted) {
  v1::JobSpec in = Benchmark();
  in.mutable_benchmark()->set_batch_size(kMaxBatch);
  in.mutable_benchmark()->set_context_length(kMaxContext);
  in.mutable_benchmark()->set_warmup_steps(kMaxSteps);
  in.mutable_benchmark()->set_measure_steps(kMaxSteps);
  EXPECT_TRUE(ResolveJobSpec(in).ok());
}

TEST(JobSpecTest, NoKindIsInvalidArgument) {
  auto out = ResolveJobSpec(v1::JobSpec());
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "benchmark", std::string(out.status().message()));
  EXPECT_EQ(JobKindName(v1::JobSpec()), "");
}

TEST(JobSpecTest, ProfileIsUnimplemented) {
  v1::JobSpec in;
  in.mutable_profile();
  auto out = ResolveJobSpec(in);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_PRED_FORMAT2(IsSubstring, "profile", std::string(out.status().message()));
  EXPECT_EQ(JobKindName(in), "profile");
}

TEST(JobSpecTest, KindNames) {
  v1::JobSpec in;
  EXPECT_EQ(JobKindName(Benchmark()), "benchmark");
  in.mutable_ddp();
  EXPECT_EQ(JobKindName(in), "ddp");
  EXPECT_EQ(ResolveJobSpec(in).status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace benchd
