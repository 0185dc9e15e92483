// The memory request on the first GPU; skipped where CUDA is not available.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "common/job_spec.h"
#include "common/memory_estimate.h"
#include "worker/memory_run.h"
#include "worker/memory_snapshot.h"

namespace benchd::worker {
namespace {

class CudaMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    setenv("TORCH_SYMBOLIZE_MODE", "fast", /*overwrite=*/0);  // as benchd-worker's main does
    torch::empty({1}, torch::kCUDA);
    cache_ = std::make_unique<ModelCache>(*ParseWorkerDevice("cuda:0"));
    char tmpl[] = "/tmp/benchd-memory-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  std::string Read(const std::string& name) {
    std::ifstream in(dir_ + "/" + name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::unique_ptr<ModelCache> cache_;
  std::string dir_;
};

v1::MemorySpec Tiny(v1::BenchmarkMode mode) {
  v1::JobSpec job;
  v1::BenchmarkSpec* step = job.mutable_memory()->mutable_step();
  step->mutable_model()->set_preset("tiny");
  step->set_mode(mode);
  step->set_batch_size(4);
  step->set_context_length(64);
  step->set_warmup_steps(2);
  auto resolved = ResolveJobSpec(job);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved->memory();
}

TEST_F(CudaMemoryTest, TrainStepRecordsPhasesAndMatchesTheAllocator) {
  auto r = RunMemory(Tiny(v1::BENCHMARK_MODE_TRAIN_STEP), *cache_, dir_);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->runs_size(), 1);
  const v1::MemoryRun& run = r->runs(0);
  EXPECT_FALSE(run.out_of_memory());
  EXPECT_FALSE(run.trace_wrapped());
  EXPECT_GT(run.trace_entries(), 0);
  // The trace's accounting agrees with the allocator's own counters (one
  // stream: a free completes when it is requested).
  EXPECT_EQ(run.peak_allocated_bytes(), run.allocator_peak_allocated_bytes());
  EXPECT_EQ(run.peak_reserved_bytes(), run.allocator_peak_reserved_bytes());
  // Blocks are rounded up to 512 B: max_memory_allocated is a little more.
  EXPECT_GE(run.max_memory_allocated_bytes(), run.peak_allocated_bytes());
  EXPECT_LT(run.max_memory_allocated_bytes(), run.peak_allocated_bytes() * 11 / 10);
  EXPECT_GT(run.baseline_allocated_bytes(), 0);  // weights + AdamW state
  ASSERT_EQ(run.phases_size(), 3);
  EXPECT_EQ(run.phases(0).name(), "forward");
  EXPECT_EQ(run.phases(1).name(), "backward");
  EXPECT_EQ(run.phases(2).name(), "optimizer_step");
  for (const auto& p : run.phases()) {
    EXPECT_GE(p.peak_allocated_bytes(), p.start_allocated_bytes()) << p.name();
    EXPECT_LE(p.peak_allocated_bytes(), run.peak_allocated_bytes()) << p.name();
  }
  EXPECT_GT(run.phases(1).start_allocated_bytes(), run.phases(0).start_allocated_bytes());
  ASSERT_GT(run.largest_allocations_size(), 0);
  EXPECT_FALSE(run.largest_allocations(0).frames().empty());  // stacks cpp by default
  // The artifacts: the allocator's own pickle and the picture.
  const std::string pickled = Read("memory.pickle");
  auto parsed = ParseSnapshotPickle(pickled);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->annotations.empty());
  const std::string svg = Read("timeline.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(run.timeline_svg(), svg);
  EXPECT_EQ(r->artifacts_size(), 2);
}

TEST_F(CudaMemoryTest, SweepGivesOneRunPerCell) {
  v1::MemorySpec spec = Tiny(v1::BENCHMARK_MODE_FORWARD);
  spec.add_modes(v1::BENCHMARK_MODE_FORWARD);
  spec.add_modes(v1::BENCHMARK_MODE_TRAIN_STEP);
  spec.add_precisions(v1::PRECISION_FP32);
  spec.add_precisions(v1::PRECISION_BF16);
  spec.set_stacks(v1::MEMORY_STACKS_NONE);
  auto r = RunMemory(spec, *cache_, dir_);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->runs_size(), 4);
  EXPECT_EQ(r->runs(0).name(), "ctx64-forward-fp32");
  EXPECT_EQ(r->runs(3).name(), "ctx64-train_step-bf16");
  // Forward keeps no AdamW state resident: its baseline is the weights only.
  EXPECT_LT(r->runs(0).baseline_allocated_bytes(), r->runs(2).baseline_allocated_bytes());
  EXPECT_EQ(r->runs(0).phases_size(), 1);
  EXPECT_TRUE(r->runs(0).largest_allocations(0).frames().empty());  // stacks none
  // The yardstick is the fp32 residual stream in every run, bf16 ones too.
  const v1::BenchmarkSpec& bf16 = r->runs(3).step();
  EXPECT_EQ(r->runs(3).activation_bytes(),
            ResidualStreamBytes(bf16.batch_size(), bf16.context_length(), bf16.model().d_model()));
  EXPECT_EQ(r->runs(3).activation_bytes(), r->runs(0).activation_bytes());
  EXPECT_EQ(r->artifacts_size(), 8);
  EXPECT_FALSE(Read("memory-ctx64-train_step-bf16.pickle").empty());
}

TEST_F(CudaMemoryTest, ARunThatDoesNotFitIsAnOutOfMemoryRow) {
  v1::JobSpec job;
  v1::BenchmarkSpec* step = job.mutable_memory()->mutable_step();
  step->mutable_model()->set_preset("small");
  step->set_batch_size(1024);
  step->set_context_length(2048);
  step->set_warmup_steps(0);
  job.mutable_memory()->add_context_lengths(2048);
  job.mutable_memory()->add_context_lengths(16);  // this one fits
  auto spec = ResolveJobSpec(job);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = RunMemory(spec->memory(), *cache_, dir_);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->runs_size(), 2);
  EXPECT_TRUE(r->runs(0).out_of_memory());
  EXPECT_NE(r->runs(0).out_of_memory_message().find("out of memory"), std::string::npos);
  EXPECT_GT(r->runs(0).oom_allocated_bytes(), 0);
  EXPECT_GT(r->runs(0).oom_device_total_bytes(), 0);
  // The failure was recorded: its snapshot shows the history up to it.
  EXPECT_FALSE(r->runs(0).snapshot_artifact().empty());
  EXPECT_FALSE(r->runs(1).out_of_memory());
  EXPECT_GT(r->runs(1).peak_allocated_bytes(), 0);
}

}  // namespace
}  // namespace benchd::worker
