// Tiny benchmark runs on the CPU: every mode and precision, cancellation,
// learning, and the failure paths.
#include "worker/benchmark.h"

#include <gtest/gtest.h>

#include <ATen/record_function.h>

#include <cmath>
#include <fstream>
#include <string>

#include "common/job_spec.h"
#include "common/model_config.h"
#include "worker/host_memory_test_util.h"

namespace benchd::worker {
namespace {

v1::BenchmarkSpec TinySpec(v1::BenchmarkMode mode, v1::Precision precision) {
  v1::JobSpec job;
  v1::BenchmarkSpec* b = job.mutable_benchmark();
  b->mutable_model()->set_preset("tiny");
  b->set_mode(mode);
  b->set_precision(precision);
  b->set_batch_size(2);
  b->set_context_length(16);
  b->set_warmup_steps(1);
  b->set_measure_steps(3);
  b->set_seed(5);
  auto resolved = ResolveJobSpec(job);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved->benchmark();
}

class BenchmarkTest : public ::testing::Test {
 protected:
  ModelCache cache_{*ParseWorkerDevice("cpu:0")};
};

TEST_F(BenchmarkTest, EveryModeAndPrecisionRunsAndAddsUp) {
  for (auto mode : {v1::BENCHMARK_MODE_FORWARD, v1::BENCHMARK_MODE_FORWARD_BACKWARD,
                    v1::BENCHMARK_MODE_TRAIN_STEP}) {
    for (auto precision : {v1::PRECISION_FP32, v1::PRECISION_BF16, v1::PRECISION_FP16}) {
      SCOPED_TRACE(ModeName(mode) + " " + PrecisionName(precision));
      const auto spec = TinySpec(mode, precision);
      int streamed = 0;
      BenchmarkHooks hooks;
      hooks.on_step = [&](const v1::StepTiming& t, int64_t total) {
        EXPECT_EQ(t.index(), streamed++);
        EXPECT_EQ(total, 4);
      };
      auto r = RunBenchmark(spec, cache_, hooks);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(streamed, 4);
      ASSERT_EQ(r->steps_size(), 4);
      EXPECT_TRUE(r->steps(0).warmup());
      for (int i = 1; i < 4; ++i) EXPECT_FALSE(r->steps(i).warmup());
      for (const auto& t : r->steps()) {
        EXPECT_TRUE(std::isfinite(t.loss()));
        // Random tokens over 1000 ids: the loss starts near ln(1000) = 6.9.
        EXPECT_GT(t.loss(), 4.0);
        EXPECT_LT(t.loss(), 12.0);
        EXPECT_GT(t.step_seconds(), 0);
        EXPECT_GT(t.forward_seconds(), 0);
        EXPECT_GE(t.host_seconds(), t.step_seconds());
        EXPECT_LE(t.forward_seconds() + t.backward_seconds() + t.optimizer_seconds(),
                  t.step_seconds() * (1 + 1e-9));
        EXPECT_EQ(t.backward_seconds() > 0, mode != v1::BENCHMARK_MODE_FORWARD);
        EXPECT_EQ(t.optimizer_seconds() > 0, mode == v1::BENCHMARK_MODE_TRAIN_STEP);
      }
      EXPECT_EQ(r->step().count(), 3);
      EXPECT_EQ(r->host_step().count(), 3);
      EXPECT_EQ(r->has_backward(), mode != v1::BENCHMARK_MODE_FORWARD);
      EXPECT_EQ(r->has_optimizer(), mode == v1::BENCHMARK_MODE_TRAIN_STEP);
      EXPECT_EQ(r->spec().model().d_model(), 64);
      EXPECT_EQ(r->spec().mode(), mode);
      EXPECT_EQ(r->spec().precision(), precision);
      EXPECT_EQ(r->spec().warmup_steps(), 1);
      EXPECT_EQ(r->warmup_steps_run(), 1);
      EXPECT_EQ(r->spec().measure_steps(), 3);
      EXPECT_EQ(r->parameter_count(), ParameterCount(spec.model()));
      EXPECT_EQ(r->device(), "cpu:0");
      EXPECT_FALSE(r->device_name().empty());
      EXPECT_EQ(r->timer(), "host_steady_clock");
      EXPECT_DOUBLE_EQ(r->tokens_per_second(), 32 / r->step().median());
      EXPECT_DOUBLE_EQ(r->flops_per_step(), StepFlops(spec.model(), mode, 2, 16));
      EXPECT_DOUBLE_EQ(r->tflops_per_second(), r->flops_per_step() / r->step().median() / 1e12);
      EXPECT_GT(r->peak_memory_bytes(), 0);
      EXPECT_EQ(r->peak_memory_source(), "host_max_rss");
      EXPECT_EQ(r->versions().torch(), TORCH_VERSION);
      EXPECT_FALSE(r->versions().benchd().empty());
    }
  }
}

TEST_F(BenchmarkTest, SecondRunFindsTheModelResident) {
  const auto spec = TinySpec(v1::BENCHMARK_MODE_FORWARD, v1::PRECISION_FP32);
  auto first = RunBenchmark(spec, cache_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->model_was_resident());
  EXPECT_GT(first->model_build_seconds(), 0);
  auto second = RunBenchmark(spec, cache_);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->model_was_resident());
  EXPECT_EQ(second->model_build_seconds(), 0);
  // Same weights (resident), same seeded batch, forward only: same loss.
  EXPECT_DOUBLE_EQ(first->steps(0).loss(), second->steps(0).loss());
}

TEST_F(BenchmarkTest, CancelStopsAtTheNextStep) {
  auto spec = TinySpec(v1::BENCHMARK_MODE_TRAIN_STEP, v1::PRECISION_FP32);
  spec.set_measure_steps(50);
  int steps = 0;
  BenchmarkHooks hooks;
  hooks.on_step = [&](const v1::StepTiming&, int64_t) { ++steps; };
  hooks.cancelled = [&] { return steps >= 2; };
  auto r = RunBenchmark(spec, cache_, hooks);
  EXPECT_TRUE(absl::IsCancelled(r.status())) << r.status();
  EXPECT_EQ(steps, 2);
}

std::vector<std::string>* user_scopes = nullptr;

std::unique_ptr<at::ObserverContext> RecordUserScope(const at::RecordFunction& fn) {
  user_scopes->push_back(fn.name());
  return nullptr;
}

TEST_F(BenchmarkTest, EachPhaseIsAProfilerUserScope) {
  // What the Kineto profiler sees: per step the step, its phases and, in
  // each of tiny's 2 layers, attention and its 4 parts.
  auto spec = TinySpec(v1::BENCHMARK_MODE_TRAIN_STEP, v1::PRECISION_BF16);
  spec.set_warmup_steps(0);
  spec.set_measure_steps(2);
  std::vector<std::string> scopes;
  user_scopes = &scopes;
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(RecordUserScope).scopes({at::RecordScope::USER_SCOPE}));
  auto r = RunBenchmark(spec, cache_);
  at::removeCallback(handle);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<std::string> layer = {"attention", "attention.scores", "attention.mask",
                                          "attention.softmax", "attention.weighted_sum"};
  std::vector<std::string> step = {"step", "forward"};
  step.insert(step.end(), layer.begin(), layer.end());
  step.insert(step.end(), layer.begin(), layer.end());
  step.insert(step.end(), {"backward", "optimizer_step"});
  std::vector<std::string> expected = step;
  expected.insert(expected.end(), step.begin(), step.end());
  EXPECT_EQ(scopes, expected);
}

TEST_F(BenchmarkTest, TrainingOnAFixedBatchLowersTheLoss) {
  auto spec = TinySpec(v1::BENCHMARK_MODE_TRAIN_STEP, v1::PRECISION_FP32);
  spec.set_warmup_steps(0);
  spec.set_measure_steps(8);
  auto r = RunBenchmark(spec, cache_);
  ASSERT_TRUE(r.ok()) << r.status();
  for (int i = 1; i < r->steps_size(); ++i) {
    EXPECT_LT(r->steps(i).loss(), r->steps(i - 1).loss()) << "step " << i;
  }
  EXPECT_LT(r->steps(7).loss(), r->steps(0).loss() - 0.05);
}

TEST_F(BenchmarkTest, OutOfMemoryIsResourceExhaustedAndTheWorkerGoesOn) {
  // A 1 TiB embedding table (2^20 x 2^18 fp32), within the request limits;
  // the kernel refuses it before any memory is touched.
  if (!KernelRefusesAllocation(int64_t{1} << 40)) {
    GTEST_SKIP() << "this kernel's overcommit policy would grant 1 TiB";
  }
  v1::JobSpec job;
  v1::BenchmarkSpec* b = job.mutable_benchmark();
  b->mutable_model()->set_vocab_size(1 << 20);
  b->mutable_model()->set_d_model(1 << 18);
  b->mutable_model()->set_d_ff(64);
  b->mutable_model()->set_num_layers(1);
  b->mutable_model()->set_num_heads(1 << 12);
  auto resolved = ResolveJobSpec(job);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  auto r = RunBenchmark(resolved->benchmark(), cache_);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(r.status().message().find("building model cpu:0/V1048576-d262144"), std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("host memory total"), std::string::npos) << r.status();
  EXPECT_TRUE(cache_.List().empty());
  EXPECT_TRUE(RunBenchmark(TinySpec(v1::BENCHMARK_MODE_FORWARD, v1::PRECISION_FP32), cache_).ok());
}

// optimizer_overlap on the CPU (fp32): the updates run inside the backward,
// reported by autograd's hooks or by the explicit backward layer by layer;
// the weights after the job are the fused step's, bit for bit, and so are
// the losses.
TEST_F(BenchmarkTest, OptimizerOverlapGivesTheFusedStepsWeights) {
  for (bool autograd : {true, false}) {
    SCOPED_TRACE(autograd ? "autograd" : "explicit backward");
    v1::BenchmarkSpec spec = TinySpec(v1::BENCHMARK_MODE_TRAIN_STEP, v1::PRECISION_FP32);
    spec.set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
    spec.set_autograd(autograd);
    ModelCache sequential_cache(*ParseWorkerDevice("cpu:0")),
        overlap_cache(*ParseWorkerDevice("cpu:0"));
    auto sequential = RunBenchmark(spec, sequential_cache);
    ASSERT_TRUE(sequential.ok()) << sequential.status();
    spec.set_optimizer_overlap(true);
    auto overlapped = RunBenchmark(spec, overlap_cache);
    ASSERT_TRUE(overlapped.ok()) << overlapped.status();
    EXPECT_TRUE(overlapped->spec().optimizer_overlap());
    EXPECT_EQ(overlapped->spec().autograd(), autograd);
    ASSERT_EQ(overlapped->steps_size(), sequential->steps_size());
    for (int i = 0; i < sequential->steps_size(); ++i) {
      EXPECT_EQ(overlapped->steps(i).loss(), sequential->steps(i).loss()) << i;
    }
    bool resident = false;
    auto a = sequential_cache.Acquire(spec.model(), spec.precision(), spec.seed(), &resident);
    auto b = overlap_cache.Acquire(spec.model(), spec.precision(), spec.seed(), &resident);
    ASSERT_TRUE(resident);
    const auto pa = a->model->parameters(), pb = b->model->parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << i;
    EXPECT_EQ(a->optimizer->Steps(), b->optimizer->Steps());
  }
}

TEST_F(BenchmarkTest, OptimizerOverlapNeedsTheFusedTrainStep) {
  v1::JobSpec job;
  *job.mutable_benchmark() = TinySpec(v1::BENCHMARK_MODE_TRAIN_STEP, v1::PRECISION_FP32);
  job.mutable_benchmark()->set_optimizer_overlap(true);
  auto refused = ResolveJobSpec(job);  // optimizer faithful
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("benchmark.optimizer_overlap"), std::string::npos);
  job.mutable_benchmark()->set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
  EXPECT_TRUE(ResolveJobSpec(job).ok());
  job.mutable_benchmark()->set_cuda_graph(true);  // without weight copies
  EXPECT_EQ(ResolveJobSpec(job).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace benchd::worker
