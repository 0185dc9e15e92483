// Benchmarks on the first GPU; skipped where CUDA is not available.
#include <gtest/gtest.h>

#include <c10/cuda/CUDACachingAllocator.h>

#include <cmath>
#include <iostream>

#include "common/job_spec.h"
#include "common/model_config.h"
#include "worker/benchmark.h"

namespace benchd::worker {
namespace {

v1::BenchmarkSpec Spec(const std::string& preset, v1::BenchmarkMode mode, v1::Precision precision,
                       int64_t batch, int64_t context, int64_t warmup, int64_t measure) {
  v1::JobSpec job;
  v1::BenchmarkSpec* b = job.mutable_benchmark();
  b->mutable_model()->set_preset(preset);
  b->set_mode(mode);
  b->set_precision(precision);
  b->set_batch_size(batch);
  b->set_context_length(context);
  b->set_warmup_steps(warmup);
  b->set_measure_steps(measure);
  auto resolved = ResolveJobSpec(job);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved->benchmark();
}

int64_t AllocatedBytes() {
  const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  return s.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
}

class CudaBenchmarkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    // The caching allocator's stats exist once CUDA is initialised; a test
    // run alone (as ctest runs each) must not read them first.
    torch::empty({1}, torch::kCUDA);
    cache_ = std::make_unique<ModelCache>(*ParseWorkerDevice("cuda:0"));
  }
  std::unique_ptr<ModelCache> cache_;
};

TEST_F(CudaBenchmarkTest, EveryModeAndPrecisionTimedWithEvents) {
  for (auto mode : {v1::BENCHMARK_MODE_FORWARD, v1::BENCHMARK_MODE_FORWARD_BACKWARD,
                    v1::BENCHMARK_MODE_TRAIN_STEP}) {
    for (auto precision : {v1::PRECISION_FP32, v1::PRECISION_BF16, v1::PRECISION_FP16}) {
      SCOPED_TRACE(ModeName(mode) + " " + PrecisionName(precision));
      const auto spec = Spec("tiny", mode, precision, 4, 64, 2, 3);
      auto r = RunBenchmark(spec, *cache_);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->timer(), "cuda_event");
      EXPECT_EQ(r->device(), "cuda:0");
      EXPECT_EQ(r->peak_memory_source(), "cuda_caching_allocator");
      EXPECT_GE(r->peak_memory_bytes(), 4 * r->parameter_count());
      for (const auto& t : r->steps()) {
        EXPECT_TRUE(std::isfinite(t.loss()));
        EXPECT_GT(t.forward_seconds(), 0);
        // The events lie inside the host's window around the synchronized step.
        EXPECT_LE(t.step_seconds(), t.host_seconds() + 1e-5);
        // Consecutive events: the phases add up to the step (events resolve ~0.5 us).
        EXPECT_NEAR(t.forward_seconds() + t.backward_seconds() + t.optimizer_seconds(),
                    t.step_seconds(), 5e-6);
      }
      EXPECT_FALSE(r->versions().cuda_runtime().empty());
      EXPECT_FALSE(r->versions().cuda_driver().empty());
      EXPECT_FALSE(r->versions().nccl().empty());
      EXPECT_FALSE(r->versions().cudnn().empty());
    }
  }
}

TEST_F(CudaBenchmarkTest, SmallPresetTrainStep) {
  for (auto precision : {v1::PRECISION_FP32, v1::PRECISION_BF16}) {
    const auto spec = Spec("small", v1::BENCHMARK_MODE_TRAIN_STEP, precision, 4, 256, 5, 10);
    auto r = RunBenchmark(spec, *cache_);
    ASSERT_TRUE(r.ok()) << r.status();
    std::cout << "small train_step " << PrecisionName(precision) << " 4x256 on " << r->device_name()
              << ": step median " << r->step().median() * 1e3 << " ms (fwd "
              << r->forward().median() * 1e3 << ", bwd " << r->backward().median() * 1e3 << ", opt "
              << r->optimizer().median() * 1e3 << "), host " << r->host_step().median() * 1e3
              << " ms, cv " << r->step().cv() << ", " << r->tflops_per_second() << " TFLOP/s, peak "
              << r->peak_memory_bytes() / 1e9 << " GB, loss " << r->steps(0).loss() << " -> "
              << r->steps(14).loss() << ", versions " << r->versions().ShortDebugString() << "\n";
    EXPECT_LT(r->steps(14).loss(), r->steps(0).loss());
    // Parameters, gradients and AdamW's m and v are all resident at the peak.
    EXPECT_GT(r->peak_memory_bytes(), 16 * r->parameter_count());
  }
}

TEST_F(CudaBenchmarkTest, OutOfMemoryInBuildIsReportedAndCleanedUp) {
  const int64_t before = AllocatedBytes();
  v1::JobSpec job;
  v1::BenchmarkSpec* b = job.mutable_benchmark();
  b->mutable_model()->set_vocab_size(1 << 20);  // a 256 GiB embedding table
  b->mutable_model()->set_d_model(1 << 16);
  b->mutable_model()->set_d_ff(64);
  b->mutable_model()->set_num_layers(1);
  b->mutable_model()->set_num_heads(1 << 10);
  auto spec = ResolveJobSpec(job);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = RunBenchmark(spec->benchmark(), *cache_);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  std::cout << r.status().message() << "\n";
  EXPECT_NE(r.status().message().find("device total"), std::string::npos);
  EXPECT_NE(r.status().message().find("building model"), std::string::npos);
  EXPECT_EQ(AllocatedBytes(), before);
  EXPECT_TRUE(cache_->List().empty());
}

TEST_F(CudaBenchmarkTest, OutOfMemoryInAStepEvictsAndTheNextJobRuns) {
  // small fits; its fp32 attention scores at batch 256 x 8192 tokens
  // (256*12*8192^2*4 bytes = 825 GB) do not.
  const int64_t before = AllocatedBytes();
  const auto spec = Spec("small", v1::BENCHMARK_MODE_FORWARD, v1::PRECISION_FP32, 256, 8192, 0, 1);
  auto r = RunBenchmark(spec, *cache_);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  std::cout << r.status().message() << "\n";
  EXPECT_NE(r.status().message().find("running step 0"), std::string::npos);
  EXPECT_NE(r.status().message().find("Model evicted"), std::string::npos);
  EXPECT_TRUE(cache_->List().empty());
  // What stays is LibTorch's own (cuBLAS workspaces), not the 0.5 GB model.
  EXPECT_LT(AllocatedBytes() - before, int64_t{64} << 20);
  auto next = RunBenchmark(
      Spec("tiny", v1::BENCHMARK_MODE_TRAIN_STEP, v1::PRECISION_BF16, 4, 64, 1, 2), *cache_);
  EXPECT_TRUE(next.ok()) << next.status();
}

}  // namespace
}  // namespace benchd::worker
