// Submit's memory check, through JobManager over fake workers whose cuda:0
// reports a small memory (as GetNodeInfo shows the workers' figures).
#include "server/jobs/memory_admission.h"

#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/job_test_util.h"

namespace benchd::server {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMiB = int64_t{1} << 20;

class MemoryAdmissionTest : public JobManagerFixture {
 protected:
  MemoryAdmissionTest() : JobManagerFixture({"cuda:0", "cpu:0"}) {}

  static v1::JobSpec Step(const std::string& device, const std::string& preset) {
    v1::JobSpec spec = Benchmark(device);
    spec.mutable_benchmark()->mutable_model()->set_preset(preset);
    return spec;
  }
};

// small, fp32 forward, batch 4, context 128: 514 MB of parameters alone.
TEST_F(MemoryAdmissionTest, RefusesAStepLargerThanTheGpuNamingEstimateAndCapacity) {
  workers_.UpAll();
  workers_.SetTotalMemory("cuda:0", 256 * kMiB);
  StartJobs();
  auto job = jobs_->Submit(Step("cuda:0", "small"));
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string m(job.status().message());
  EXPECT_THAT(m, HasSubstr("memory estimate exceeds cuda:0's memory"));
  EXPECT_THAT(m, HasSubstr("small forward fp32, batch 4, context 128: "));
  EXPECT_THAT(m, HasSubstr("at its forward peak"));
  EXPECT_THAT(m, HasSubstr("against 256.0 MiB (268435456 B)"));
  EXPECT_THAT(m, HasSubstr("force"));
  // Nothing was stored or run.
  auto page = jobs_->List(JobFilter(), 10, 0);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->jobs.empty());
}

TEST_F(MemoryAdmissionTest, ForceQueuesItAnyway) {
  workers_.UpAll();
  workers_.SetTotalMemory("cuda:0", 256 * kMiB);
  StartJobs();
  v1::JobSpec spec = Step("cuda:0", "small");
  spec.set_force(true);
  const std::string id = Submit(spec);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(WaitFinal(id).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(Get(id).spec().force());  // kept in the stored spec
  // The worker gets the step without it: the decision is the daemon's.
  const auto runs = workers_.client("cuda:0")->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_FALSE(runs[0].spec().force());
  EXPECT_EQ(runs[0].spec().benchmark().model().preset(), "small");
}

TEST_F(MemoryAdmissionTest, AStepThatFitsAndCpuDevicesPass) {
  workers_.UpAll();
  workers_.SetTotalMemory("cuda:0", 256 * kMiB);
  workers_.SetTotalMemory("cpu:0", 1 * kMiB);  // a CPU is never refused by this
  StartJobs();
  EXPECT_FALSE(Submit(Step("cuda:0", "tiny")).empty());
  EXPECT_FALSE(Submit(Step("cpu:0", "small")).empty());
}

TEST_F(MemoryAdmissionTest, UnknownDeviceMemoryIsNotChecked) {
  workers_.UpAll();  // no SetTotalMemory: the worker has not reported it (0)
  StartJobs();
  EXPECT_FALSE(Submit(Step("cuda:0", "2.7B")).empty());
}

TEST_F(MemoryAdmissionTest, ProfileAndTrainStepAreChecked) {
  workers_.UpAll();
  workers_.SetTotalMemory("cuda:0", 1024 * kMiB);
  StartJobs();
  v1::JobSpec profile;
  profile.set_device("cuda:0");
  *profile.mutable_profile()->mutable_step() = Step("cuda:0", "small").benchmark();
  profile.mutable_profile()->mutable_step()->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  auto job = jobs_->Submit(profile);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(job.status().message(), HasSubstr("small train_step fp32"));
  // Its forward alone fits in 1 GiB (514 MB of parameters, ~150 MB of activations).
  EXPECT_FALSE(Submit(Step("cuda:0", "small")).empty());
}

// A memory sweep runs when one of its runs fits: the rest become the
// out-of-memory rows such a sweep is for. Refused when none fits.
TEST_F(MemoryAdmissionTest, MemorySweepIsRefusedOnlyWhenNoRunFits) {
  workers_.UpAll();
  workers_.SetTotalMemory("cuda:0", 1024 * kMiB);
  StartJobs();
  v1::JobSpec sweep;
  sweep.set_device("cuda:0");
  *sweep.mutable_memory()->mutable_step() = Step("cuda:0", "small").benchmark();
  sweep.mutable_memory()->add_modes(v1::BENCHMARK_MODE_FORWARD);
  sweep.mutable_memory()->add_modes(v1::BENCHMARK_MODE_TRAIN_STEP);
  EXPECT_FALSE(Submit(sweep).empty());

  sweep.mutable_memory()->clear_modes();
  sweep.mutable_memory()->add_modes(v1::BENCHMARK_MODE_TRAIN_STEP);
  sweep.mutable_memory()->add_context_lengths(128);
  sweep.mutable_memory()->add_context_lengths(256);
  auto job = jobs_->Submit(sweep);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(job.status().message(), HasSubstr("the smallest of the sweep's runs, small "
                                                "train_step fp32, batch 4, context 128"));
}

// A JobSpec.sweep is checked cell by cell: refused only when no cell fits
// (tiny fits 256 MiB, small does not), whatever its stored request says.
TEST_F(MemoryAdmissionTest, ASweepIsRefusedOnlyWhenNoCellFits) {
  workers_.UpAll();
  workers_.SetTotalMemory("cuda:0", 256 * kMiB);
  StartJobs();
  v1::JobSpec sweep = Step("cuda:0", "");
  v1::SweepAxis* axis = sweep.mutable_sweep()->add_axes();
  axis->set_field("model.preset");
  axis->add_values("tiny");
  axis->add_values("small");
  EXPECT_FALSE(Submit(sweep).empty());

  axis->clear_values();
  axis->add_values("small");
  axis->add_values("medium");
  auto job = jobs_->Submit(sweep);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(job.status().message(),
              HasSubstr("the smallest of the sweep's runs, small forward fp32, batch 4"));
}

// Options the estimate does not model: only the model state is compared.
TEST_F(MemoryAdmissionTest, UnmodelledOptionsCompareTheModelStateOnly) {
  workers_.UpAll();
  workers_.SetTotalMemory("cuda:0", 1024 * kMiB);
  StartJobs();
  v1::JobSpec spec = Step("cuda:0", "small");
  spec.mutable_benchmark()->set_attention(v1::ATTENTION_IMPL_SDPA);
  // Parameters only (514 MB) fit, whatever SDPA's activations come to.
  EXPECT_FALSE(Submit(spec).empty());
  spec.mutable_benchmark()->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);  // 16 B x P = 2.06 GB
  auto job = jobs_->Submit(spec);
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(),
              HasSubstr("at least 1.92 GiB (2058006528 B) of model state (its attention other "
                        "than faithful are outside the estimate"));
}

// The function alone: collective jobs and devices not listed pass.
TEST(CheckFitsDeviceMemoryTest, OnlyAListedCudaDeviceWithItsMemoryIsChecked) {
  v1::JobSpec in;
  in.set_device("cuda:1");
  in.mutable_benchmark()->mutable_model()->set_preset("2.7B");
  auto resolved = ResolveJobSpec(in);  // what Submit passes: sizes and defaults written out
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  const v1::JobSpec& spec = *resolved;
  v1::Device small;
  small.set_name("cuda:0");
  small.set_total_memory_bytes(kMiB);
  EXPECT_TRUE(CheckFitsDeviceMemory(spec, {"cuda:1"}, {small}).ok());
  small.set_name("cuda:1");
  small.set_description("NVIDIA Tiny");
  const absl::Status s = CheckFitsDeviceMemory(spec, {"cuda:1"}, {small});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("on cuda:1 (NVIDIA Tiny)"));
  v1::JobSpec collective;
  collective.mutable_collective()->add_devices("cuda:1");
  EXPECT_TRUE(CheckFitsDeviceMemory(collective, {"cuda:1"}, {small}).ok());
}

// A data-parallel job: each rank's largest run, on every rank's device.
TEST(CheckFitsDeviceMemoryTest, DataParallelCountsShardingAndTheFlatCopy) {
  auto ddp = [](std::vector<v1::DdpVariant> variants, v1::DdpOptimizer optimizer) {
    v1::JobSpec in;
    v1::DdpSpec* d = in.mutable_ddp();
    d->mutable_target()->add_devices("cuda:0");
    d->mutable_target()->add_devices("cuda:1");
    d->mutable_step()->mutable_model()->set_preset("xl");
    d->mutable_step()->set_context_length(128);
    d->set_global_batch_size(8);
    for (auto v : variants) d->add_variants(v);
    d->add_optimizers(optimizer);
    auto resolved = ResolveJobSpec(in);
    EXPECT_TRUE(resolved.ok()) << resolved.status();
    return *resolved;
  };
  v1::Device gpu;
  gpu.set_name("cuda:1");
  gpu.set_total_memory_bytes(int64_t{28} << 30);  // xl fp32: ~30 GiB a rank unsharded
  const std::vector<std::string> ranks = {"cuda:0", "cuda:1"};
  // Every variant with AdamW whole: model state + activations + the flat copy.
  const absl::Status s = CheckFitsDeviceMemory(ddp({}, v1::DDP_OPTIMIZER_ADAMW), ranks, {gpu});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("ddp.step: the memory estimate exceeds cuda:1's memory: xl "));
  EXPECT_THAT(s.message(),
              HasSubstr("per rank of 2, + 7.44 GiB for the flat, bucketed and reducer runs'"));
  EXPECT_THAT(s.message(), HasSubstr("shard AdamW (--optimizers sharded_adamw)"));
  // Overlap alone, AdamW sharded: ZeRO-1's 4 + 4 + 8/2 bytes a parameter fit.
  EXPECT_TRUE(CheckFitsDeviceMemory(ddp({v1::DDP_VARIANT_OVERLAP}, v1::DDP_OPTIMIZER_SHARDED_ADAMW),
                                    ranks, {gpu})
                  .ok());
  // A rank on the CPU, or a device that has not reported its memory, is not checked.
  gpu.set_total_memory_bytes(0);
  EXPECT_TRUE(CheckFitsDeviceMemory(ddp({}, v1::DDP_OPTIMIZER_ADAMW), ranks, {gpu}).ok());
  v1::JobSpec forced = ddp({}, v1::DDP_OPTIMIZER_ADAMW);
  forced.set_force(true);
  gpu.set_total_memory_bytes(kMiB);
  EXPECT_TRUE(CheckFitsDeviceMemory(forced, ranks, {gpu}).ok());
}

}  // namespace
}  // namespace benchd::server
