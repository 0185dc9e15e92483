#include "client/spec_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/ddp_spec.h"

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

namespace benchd::client {
namespace {

// Devices and nothing else: the smallest request `submit ddp` sends.
DdpOptions TwoCpuRanks() {
  DdpOptions o;
  o.devices = "cpu:0,cpu:1";
  return o;
}

TEST(BuildDdpSpec, FlagsFillEveryField) {
  DdpOptions o = TwoCpuRanks();
  o.devices = "cpu:0, cpu:1";
  o.backend = "GLOO";
  o.step.vocab_size = 97;
  o.step.d_model = 32;
  o.step.num_layers = 2;
  o.step.num_heads = 4;
  o.step.precision = "bf16";
  o.step.context_length = 16;
  o.step.warmup_steps = 0;
  o.step.measure_steps = 2;
  o.step.seed = 7;
  o.step.allow_tf32 = true;
  o.global_batch = 8;
  o.variants = "naive, DDP_VARIANT_FLAT,overlap,bucketed";
  o.bucket_mb = "1,2.5,100";
  o.optimizers = "adamw,sharded_adamw";
  o.gradient_compressions = "none,BF16";
  o.timeout_seconds = 30;
  o.no_traces = true;
  absl::StatusOr<v1::JobSpec> spec = BuildDdpSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->device(), "");
  ASSERT_TRUE(spec->has_ddp());
  const v1::DdpSpec& d = spec->ddp();
  EXPECT_EQ(d.target().group(), "");
  ASSERT_EQ(d.target().devices_size(), 2);
  EXPECT_EQ(d.target().devices(0), "cpu:0");
  EXPECT_EQ(d.target().devices(1), "cpu:1");
  EXPECT_EQ(d.target().backend(), v1::COLLECTIVE_BACKEND_GLOO);
  const v1::BenchmarkSpec& step = d.step();
  EXPECT_EQ(step.model().vocab_size(), 97);
  EXPECT_EQ(step.model().d_model(), 32);
  EXPECT_EQ(step.model().num_layers(), 2);
  EXPECT_EQ(step.model().num_heads(), 4);
  EXPECT_EQ(step.precision(), v1::PRECISION_BF16);
  EXPECT_EQ(step.context_length(), 16);
  EXPECT_TRUE(step.has_warmup_steps());  // an explicit 0 stays explicit
  EXPECT_EQ(step.warmup_steps(), 0);
  EXPECT_EQ(step.measure_steps(), 2);
  EXPECT_EQ(step.seed(), 7u);
  EXPECT_TRUE(step.allow_tf32());
  EXPECT_FALSE(step.has_batch_size());
  EXPECT_EQ(d.global_batch_size(), 8);
  EXPECT_THAT(d.variants(),
              ::testing::ElementsAre(v1::DDP_VARIANT_NAIVE, v1::DDP_VARIANT_FLAT,
                                     v1::DDP_VARIANT_OVERLAP, v1::DDP_VARIANT_BUCKETED));
  EXPECT_THAT(d.bucket_mb(), ::testing::ElementsAre(1.0, 2.5, 100.0));
  EXPECT_THAT(d.optimizers(),
              ::testing::ElementsAre(v1::DDP_OPTIMIZER_ADAMW, v1::DDP_OPTIMIZER_SHARDED_ADAMW));
  EXPECT_THAT(d.gradient_compressions(), ::testing::ElementsAre(v1::DDP_GRADIENT_COMPRESSION_NONE,
                                                                v1::DDP_GRADIENT_COMPRESSION_BF16));
  EXPECT_EQ(d.timeout_seconds(), 30.0);
  EXPECT_TRUE(d.has_traces());
  EXPECT_FALSE(d.traces());
}

TEST(BuildDdpSpec, UnsetFlagsLeaveTheDaemonsDefaults) {
  absl::StatusOr<v1::JobSpec> spec = BuildDdpSpec(TwoCpuRanks());
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::DdpSpec& d = spec->ddp();
  EXPECT_EQ(d.target().backend(), v1::COLLECTIVE_BACKEND_UNSPECIFIED);
  EXPECT_FALSE(d.has_global_batch_size());
  EXPECT_FALSE(d.step().has_batch_size());
  EXPECT_FALSE(d.step().has_warmup_steps());
  EXPECT_EQ(d.step().mode(), v1::BENCHMARK_MODE_UNSPECIFIED);
  EXPECT_TRUE(d.variants().empty());
  EXPECT_TRUE(d.bucket_mb().empty());
  EXPECT_TRUE(d.optimizers().empty());
  EXPECT_FALSE(d.has_timeout_seconds());
  EXPECT_FALSE(d.has_traces());  // the daemon's default: on
}

TEST(BuildDdpSpec, GroupPerRankBatchAndTheShardedShortcut) {
  DdpOptions o;
  o.group = "g1";
  o.step.preset = "small";
  o.step.batch_size = 4;
  o.sharded_optimizer = true;
  absl::StatusOr<v1::JobSpec> spec = BuildDdpSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::DdpSpec& d = spec->ddp();
  EXPECT_EQ(d.target().group(), "g1");
  EXPECT_TRUE(d.target().devices().empty());
  EXPECT_EQ(d.step().model().preset(), "small");
  EXPECT_EQ(d.step().batch_size(), 4);
  EXPECT_FALSE(d.has_global_batch_size());
  EXPECT_THAT(d.optimizers(), ::testing::ElementsAre(v1::DDP_OPTIMIZER_SHARDED_ADAMW));
}

TEST(BuildDdpSpec, OptimizerImplIsTheStepsAndABadOneNamesItsFlag) {
  DdpOptions o = TwoCpuRanks();
  o.step.optimizer = "fused";
  absl::StatusOr<v1::JobSpec> spec = BuildDdpSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ddp().step().optimizer_impl(), v1::OPTIMIZER_IMPL_FUSED);
  o.step.optimizer = "adam";
  spec = BuildDdpSpec(o);
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(absl::StartsWith(spec.status().message(), "--optimizer-impl: "))
      << spec.status().message();
  EXPECT_THAT(std::string(spec.status().message()), ::testing::HasSubstr("'adam'"));
}

TEST(BuildDdpSpec, BucketSizesWithTheDefaultVariantsWhichIncludeBucketed) {
  DdpOptions o = TwoCpuRanks();
  o.bucket_mb = "25";
  absl::StatusOr<v1::JobSpec> spec = BuildDdpSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->ddp().bucket_mb(), ::testing::ElementsAre(25.0));
}

TEST(BuildDdpSpec, BadFlagsNameTheFlagWhatCameAndWhatIsAccepted) {
  struct Case {
    std::function<void(DdpOptions&)> set;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](DdpOptions& o) { o.group = "g1"; },
       "--group and --device: give one (a resident group, or devices and a backend)"},
      {[](DdpOptions& o) { o.devices = " , "; },
       "--device: give the ranks' devices in rank order (e.g. cpu:0,cpu:1 or cuda:0,cuda:1), or "
       "--group ID for a resident group"},
      {[](DdpOptions& o) {
         o.devices.clear();
         o.group = "g1";
         o.backend = "nccl";
       },
       "--backend: a resident group has its own backend; give --backend with --device, not with "
       "--group (got --backend nccl)"},
      {[](DdpOptions& o) { o.backend = "mpi"; },
       "--backend: unknown backend 'mpi'; expected nccl or gloo"},
      {[](DdpOptions& o) { o.step.device = "cuda:0"; },
       "step.device: a data-parallel job runs on its ranks' devices (--device, rank order) or a "
       "--group, not on the step's device; got cuda:0"},
      {[](DdpOptions& o) {
         o.global_batch = 8;
         o.step.batch_size = 4;
       },
       "--global-batch and --batch-size: give one (the batch of all ranks together, split evenly, "
       "or each rank's)"},
      {[](DdpOptions& o) { o.variants = "naive,ring"; },
       "--variants: unknown variant 'ring'; expected naive, flat, overlap, bucketed or reducer, "
       "separated "
       "by commas"},
      {[](DdpOptions& o) { o.bucket_mb = "10,ten"; },
       "--bucket-mb: expected bucket sizes in MB (10^6 bytes), above 0 and at most 1000000, "
       "separated by commas; got 'ten'"},
      {[](DdpOptions& o) { o.bucket_mb = "0"; }, "got '0'"},
      {[](DdpOptions& o) { o.bucket_mb = "-5"; }, "got '-5'"},
      {[](DdpOptions& o) { o.bucket_mb = "2000000"; }, "got '2000000'"},
      {[](DdpOptions& o) { o.bucket_mb = "inf"; }, "got 'inf'"},
      {[](DdpOptions& o) { o.bucket_mb = "nan"; }, "got 'nan'"},
      {[](DdpOptions& o) {
         o.variants = "naive,flat";
         o.bucket_mb = "25";
       },
       "--bucket-mb: only the bucketed and reducer variants have buckets, and --variants "
       "naive,flat leaves them out (add bucketed, or drop --bucket-mb)"},
      {[](DdpOptions& o) {
         o.sharded_optimizer = true;
         o.optimizers = "adamw";
       },
       "--sharded-optimizer and --optimizers: give one (--sharded-optimizer is --optimizers "
       "sharded_adamw)"},
      {[](DdpOptions& o) { o.optimizers = "sgd"; },
       "--optimizers: unknown optimizer 'sgd'; expected adamw, sharded_adamw or adamw_overlapped, "
       "separated by "
       "commas"},
      {[](DdpOptions& o) { o.step.precision = "fp8"; }, "--precision: "},
      {[](DdpOptions& o) { o.gradient_compressions = "fp16"; },
       "--gradient-compressions: unknown gradient compression 'fp16'; expected none or bf16, "
       "separated by commas"},
  };
  for (const Case& c : cases) {
    DdpOptions o = TwoCpuRanks();
    c.set(o);
    absl::StatusOr<v1::JobSpec> spec = BuildDdpSpec(o);
    ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(c.message));
  }
}

TEST(BuildDdpSpec, ChoicesInMessagesComeFromTheEnums) {
  DdpOptions o = TwoCpuRanks();
  o.variants = "ring";
  EXPECT_THAT(std::string(BuildDdpSpec(o).status().message()),
              HasSubstr("expected " + DdpVariantChoices()));
  o.variants.clear();
  o.optimizers = "sgd";
  EXPECT_THAT(std::string(BuildDdpSpec(o).status().message()),
              HasSubstr("expected " + DdpOptimizerChoices()));
}

}  // namespace
}  // namespace benchd::client
