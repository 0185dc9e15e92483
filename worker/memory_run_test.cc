// The memory request's CPU-side behaviour: the refusal on a CPU worker, the
// hooks it records through, artifact naming and the activation yardstick.
// Recording itself needs a GPU: cuda_memory_test.cc.
#include "worker/memory_run.h"

#include <string>
#include <vector>

#include "common/job_spec.h"
#include "gtest/gtest.h"
#include "worker/benchmark.h"

namespace benchd::worker {
namespace {

v1::JobSpec TinyMemory() {
  v1::JobSpec job;
  v1::BenchmarkSpec* step = job.mutable_memory()->mutable_step();
  step->mutable_model()->set_preset("tiny");
  step->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  step->set_batch_size(2);
  step->set_context_length(16);
  step->set_warmup_steps(2);
  auto resolved = ResolveJobSpec(job);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return *resolved;
}

TEST(MemoryRunTest, RefusedOnACpuWorker) {
  ModelCache cache(*ParseWorkerDevice("cpu:0"));
  auto r = RunMemory(TinyMemory().memory(), cache, "/tmp/unused");
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(r.status().message()).rfind("memory: needs a CUDA device", 0), 0u);
  EXPECT_NE(std::string(r.status().message()).find("this worker is cpu:0"), std::string::npos);
  EXPECT_TRUE(cache.List().empty());  // refused before building anything
}

// The hooks the memory request records through fire once each, around the
// measured steps only.
TEST(MemoryRunTest, MeasureHooksBracketTheMeasuredSteps) {
  ModelCache cache(*ParseWorkerDevice("cpu:0"));
  const v1::JobSpec job = TinyMemory();
  const std::vector<v1::BenchmarkSpec> cells = MemoryRunSpecs(job.memory(), job.memory().step());
  ASSERT_EQ(cells.size(), 1u);
  std::vector<std::string> seen;
  BenchmarkHooks hooks;
  hooks.on_step = [&](const v1::StepTiming& t, int64_t) {
    seen.push_back(t.warmup() ? "warmup" : "step");
  };
  hooks.on_measure_start = [&] { seen.push_back("start"); };
  hooks.on_measure_end = [&] { seen.push_back("end"); };
  hooks.on_out_of_memory = [&] { seen.push_back("oom"); };
  auto r = RunBenchmark(cells[0], cache, hooks);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(seen, (std::vector<std::string>{"warmup", "warmup", "start", "step", "step", "end"}));
}

TEST(MemoryRunTest, ArtifactNames) {
  EXPECT_EQ(SnapshotArtifactName("ctx128-forward-fp32", false), "memory.pickle");
  EXPECT_EQ(TimelineArtifactName("ctx128-forward-fp32", false), "timeline.svg");
  EXPECT_EQ(SnapshotArtifactName("ctx128-forward-fp32", true), "memory-ctx128-forward-fp32.pickle");
  EXPECT_EQ(TimelineArtifactName("ctx128-forward-fp32", true), "timeline-ctx128-forward-fp32.svg");
}

}  // namespace
}  // namespace benchd::worker
