#include "client/spec_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace benchd::client {
namespace {

using ::testing::HasSubstr;

TEST(BuildBenchmarkSpec, FlagsFillEveryField) {
  BenchmarkOptions o;
  o.device = "cuda:1";
  o.preset = "small";
  o.vocab_size = 5000;
  o.d_model = 512;
  o.d_ff = 2048;
  o.num_layers = 6;
  o.num_heads = 8;
  o.rope_theta = 500000.0;
  o.mode = "train_step";
  o.precision = "bf16";
  o.batch_size = 8;
  o.context_length = 256;
  o.warmup_steps = 3;
  o.measure_steps = 20;
  o.seed = 42;
  absl::StatusOr<v1::JobSpec> spec = BuildBenchmarkSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->device(), "cuda:1");
  ASSERT_TRUE(spec->has_benchmark());
  const v1::BenchmarkSpec& b = spec->benchmark();
  EXPECT_EQ(b.model().preset(), "small");
  EXPECT_EQ(b.model().vocab_size(), 5000);
  EXPECT_EQ(b.model().d_model(), 512);
  EXPECT_EQ(b.model().d_ff(), 2048);
  EXPECT_EQ(b.model().num_layers(), 6);
  EXPECT_EQ(b.model().num_heads(), 8);
  EXPECT_EQ(b.model().rope_theta(), 500000.0);
  EXPECT_EQ(b.mode(), v1::BENCHMARK_MODE_TRAIN_STEP);
  EXPECT_EQ(b.precision(), v1::PRECISION_BF16);
  EXPECT_EQ(b.batch_size(), 8);
  EXPECT_EQ(b.context_length(), 256);
  EXPECT_TRUE(b.has_warmup_steps());
  EXPECT_EQ(b.warmup_steps(), 3);
  EXPECT_EQ(b.measure_steps(), 20);
  EXPECT_EQ(b.seed(), 42u);
}

TEST(BuildBenchmarkSpec, UnsetFlagsLeaveTheDaemonsDefaults) {
  absl::StatusOr<v1::JobSpec> spec = BuildBenchmarkSpec({});
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(spec->has_benchmark());
  EXPECT_EQ(spec->benchmark().mode(), v1::BENCHMARK_MODE_UNSPECIFIED);
  EXPECT_EQ(spec->benchmark().precision(), v1::PRECISION_UNSPECIFIED);
  EXPECT_FALSE(spec->benchmark().has_warmup_steps());
  EXPECT_EQ(spec->benchmark().batch_size(), 0);
}

TEST(BuildBenchmarkSpec, ZeroWarmupIsExplicit) {
  BenchmarkOptions o;
  o.warmup_steps = 0;
  absl::StatusOr<v1::JobSpec> spec = BuildBenchmarkSpec(o);
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(spec->benchmark().has_warmup_steps());
  EXPECT_EQ(spec->benchmark().warmup_steps(), 0);
}

TEST(BuildBenchmarkSpec, AcceptsAliases) {
  BenchmarkOptions o;
  o.mode = "FORWARD_BACKWARD";
  o.precision = "float16";
  absl::StatusOr<v1::JobSpec> spec = BuildBenchmarkSpec(o);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->benchmark().mode(), v1::BENCHMARK_MODE_FORWARD_BACKWARD);
  EXPECT_EQ(spec->benchmark().precision(), v1::PRECISION_FP16);
}

TEST(BuildBenchmarkSpec, BadModeNamesTheFlagAndChoices) {
  BenchmarkOptions o;
  o.mode = "sprint";
  absl::StatusOr<v1::JobSpec> spec = BuildBenchmarkSpec(o);
  ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("--mode: "));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("'sprint'"));
  EXPECT_THAT(std::string(spec.status().message()),
              HasSubstr("forward, forward_backward or train_step"));
}

TEST(BuildBenchmarkSpec, BadPrecisionNamesTheFlagAndChoices) {
  BenchmarkOptions o;
  o.precision = "fp8";
  absl::StatusOr<v1::JobSpec> spec = BuildBenchmarkSpec(o);
  ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("--precision: "));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("fp32, bf16 or fp16"));
}

TEST(BuildBenchmarkSpec, RangesAreLeftToTheDaemon) {
  BenchmarkOptions o;
  o.batch_size = -1;
  o.preset = "huge";
  EXPECT_TRUE(BuildBenchmarkSpec(o).ok());
}

TEST(BuildBenchmarkSpec, ExportParityOnlyWhenAsked) {
  BenchmarkOptions o;
  o.preset = "tiny";
  EXPECT_FALSE(BuildBenchmarkSpec(o)->benchmark().export_parity());
  o.export_parity = true;
  EXPECT_TRUE(BuildBenchmarkSpec(o)->benchmark().export_parity());
}

TEST(BuildProfileSpec, StepFlagsAndProfilerFlags) {
  ProfileOptions o;
  o.step.preset = "small";
  o.step.device = "cuda:1";
  o.step.measure_steps = 7;
  o.profile_steps = 2;
  o.activities = "cpu, CUDA";
  o.record_shapes = true;
  auto spec = BuildProfileSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->device(), "cuda:1");
  const v1::ProfileSpec& p = spec->profile();
  EXPECT_EQ(p.step().model().preset(), "small");
  EXPECT_EQ(p.step().measure_steps(), 7);
  EXPECT_EQ(p.profile_steps(), 2);
  ASSERT_EQ(p.activities_size(), 2);
  EXPECT_EQ(p.activities(0), v1::PROFILER_ACTIVITY_CPU);
  EXPECT_EQ(p.activities(1), v1::PROFILER_ACTIVITY_CUDA);
  EXPECT_TRUE(p.record_shapes());
  EXPECT_FALSE(p.profile_memory());
}

TEST(BuildProfileSpec, RefusalsNameTheFlag) {
  ProfileOptions o;
  o.step.preset = "tiny";
  o.activities = "cpu,tpu";
  EXPECT_THAT(std::string(BuildProfileSpec(o).status().message()),
              HasSubstr("--activities: unknown activity 'tpu'"));
  o.activities = "";
  o.step.cuda_graph = true;
  EXPECT_THAT(std::string(BuildProfileSpec(o).status().message()), HasSubstr("--cuda-graph"));
  o.step.cuda_graph = false;
  o.step.mode = "sideways";
  EXPECT_THAT(std::string(BuildProfileSpec(o).status().message()), HasSubstr("--mode"));
}

}  // namespace
}  // namespace benchd::client

namespace benchd::client {
namespace {

TEST(BuildEstimateRequest, StepAndShardingFlags) {
  EstimateOptions o;
  o.step.preset = "2.7B";
  o.step.mode = "train_step";
  o.step.precision = "bf16";
  o.step.batch_size = 4;
  o.step.context_length = 256;
  o.step.autograd = true;
  o.data_parallel = 8;
  o.zero_stage = 2;
  o.tensor_parallel = 2;
  auto r = BuildEstimateRequest(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model().preset(), "2.7B");
  EXPECT_EQ(r->mode(), v1::BENCHMARK_MODE_TRAIN_STEP);
  EXPECT_EQ(r->precision(), v1::PRECISION_BF16);
  EXPECT_EQ(r->batch_size(), 4);
  EXPECT_EQ(r->context_length(), 256);
  EXPECT_TRUE(r->autograd());
  EXPECT_EQ(r->sharding().data_parallel(), 8);
  EXPECT_EQ(r->sharding().zero_stage(), 2);
  EXPECT_EQ(r->sharding().tensor_parallel(), 2);
  EXPECT_FALSE(r->sharding().has_pipeline_stages());  // unset: the daemon's default
  EXPECT_FALSE(r->sharding().fsdp());
}

TEST(BuildEstimateRequest, UnsetStaysUnsetAndBadEnumsNameTheFlag) {
  EstimateOptions o;
  o.step.preset = "small";
  auto r = BuildEstimateRequest(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->has_batch_size());
  EXPECT_FALSE(r->has_context_length());
  EXPECT_FALSE(r->sharding().has_data_parallel());
  o.step.precision = "fp8";
  r = BuildEstimateRequest(o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("--precision"));
}

}  // namespace
}  // namespace benchd::client
