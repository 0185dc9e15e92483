#include "client/memory_view.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "client/commands.h"
#include "client/job_view.h"
#include "client/spec_builder.h"
#include "gtest/gtest.h"

namespace benchd::client {
namespace {

v1::MemoryResult SampleMemoryResult() {
  v1::MemoryResult r;
  r.mutable_spec()->mutable_step()->mutable_model()->set_preset("small");
  r.set_parameter_count(128625408);
  r.set_device("cuda:0");
  r.mutable_spec()->set_stacks(v1::MEMORY_STACKS_CPP);
  r.mutable_spec()->set_max_entries(100000);
  r.set_artifacts_dir("/data/artifacts/7");
  v1::MemoryRun* ok = r.add_runs();
  ok->set_name("ctx128-train_step-fp32");
  ok->mutable_step()->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  ok->mutable_step()->set_precision(v1::PRECISION_FP32);
  ok->mutable_step()->set_batch_size(4);
  ok->mutable_step()->set_context_length(128);
  ok->set_peak_allocated_bytes(int64_t{3} << 30);
  ok->set_peak_reserved_bytes(int64_t{4} << 30);
  ok->set_baseline_allocated_bytes(int64_t{2} << 30);
  ok->set_allocator_peak_allocated_bytes(int64_t{3} << 30);
  ok->set_allocator_peak_reserved_bytes(int64_t{4} << 30);
  ok->set_activation_bytes(4 * 128 * 768 * 4);
  ok->mutable_step()->set_measure_steps(2);  // the recorded steps
  ok->mutable_step()->set_warmup_steps(5);
  for (const char* p : {"forward", "backward", "optimizer_step"}) {
    v1::MemoryPhase* ph = ok->add_phases();
    ph->set_name(p);
    ph->set_peak_allocated_bytes(int64_t{5} << 29);
  }
  v1::MemoryAllocation* a = ok->add_largest_allocations();
  a->set_size_bytes(100 << 20);
  a->set_phase("forward");
  a->set_count(2);
  a->add_frames("CUDACachingAllocator.cpp:1:malloc");
  a->set_origin("transformer.cc:182:benchd::worker::TransformerLMImpl::forward");
  ok->set_snapshot_artifact("memory-ctx128-train_step-fp32.pickle");
  ok->set_timeline_artifact("timeline-ctx128-train_step-fp32.svg");
  v1::MemoryRun* oom = r.add_runs();
  oom->set_name("ctx512-train_step-fp32");
  oom->mutable_step()->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  oom->mutable_step()->set_precision(v1::PRECISION_FP32);
  oom->mutable_step()->set_context_length(512);
  oom->set_out_of_memory(true);
  oom->set_out_of_memory_message("out of memory on cuda:0 while running step 0");
  oom->set_oom_allocated_bytes(int64_t{79} << 30);
  oom->set_oom_reserved_bytes(int64_t{79} << 30);
  oom->set_oom_device_total_bytes(int64_t{80} << 30);
  oom->set_oom_device_free_bytes(int64_t{1} << 29);
  return r;
}

TEST(MemoryViewTest, PeakTableHasARowPerRunAndOomRows) {
  const std::string t = MemoryPeakTable(SampleMemoryResult());
  EXPECT_NE(t.find("ctx128-train_step-fp32"), std::string::npos) << t;
  EXPECT_NE(t.find("3.00 GiB"), std::string::npos) << t;
  EXPECT_NE(t.find("2.50 GiB"), std::string::npos) << t;  // phase peaks
  EXPECT_NE(
      t.find("OOM (allocated 79.00 GiB, reserved 79.00 GiB, device free 512.00 MiB of 80.00 GiB)"),
      std::string::npos)
      << t;
}

TEST(MemoryViewTest, ReportHasPhasesLargestAllocationsAndArtifacts) {
  const std::string v = MemoryResultView(SampleMemoryResult());
  EXPECT_NE(v.find("transformer.cc:182:benchd::worker::TransformerLMImpl::forward"),
            std::string::npos)
      << v;
  EXPECT_NE(v.find("optimizer_step"), std::string::npos);
  EXPECT_NE(v.find("(agree with the trace)"), std::string::npos);
  EXPECT_NE(v.find("out of memory: out of memory on cuda:0"), std::string::npos);
  EXPECT_NE(v.find("/data/artifacts/7"), std::string::npos);
  EXPECT_NE(v.find("memory-ctx128-train_step-fp32.pickle"), std::string::npos);
}

TEST(MemoryViewTest, TimelineFileNames) {
  v1::MemoryResult r = SampleMemoryResult();
  EXPECT_EQ(TimelineFileName("7", r, 0), "7-timeline-ctx128-train_step-fp32.svg");
  r.mutable_runs()->RemoveLast();
  EXPECT_EQ(TimelineFileName("7", r, 0), "7-timeline.svg");
}

TEST(MemorySpecBuilderTest, SweepFlags) {
  MemoryOptions o;
  o.step.preset = "2.7B";
  o.step.mode = "forward";
  o.contexts = "128, 256,512";
  o.modes = "forward,train_step";
  o.precisions = "fp32,bf16";
  o.record_steps = 3;
  o.stacks = "none";
  auto spec = BuildMemorySpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const v1::MemorySpec& m = spec->memory();
  EXPECT_EQ(m.step().model().preset(), "2.7B");
  ASSERT_EQ(m.context_lengths_size(), 3);
  EXPECT_EQ(m.context_lengths(2), 512);
  ASSERT_EQ(m.modes_size(), 2);
  EXPECT_EQ(m.modes(1), v1::BENCHMARK_MODE_TRAIN_STEP);
  EXPECT_EQ(m.precisions(1), v1::PRECISION_BF16);
  EXPECT_EQ(m.record_steps(), 3);
  EXPECT_EQ(m.stacks(), v1::MEMORY_STACKS_NONE);
  EXPECT_FALSE(m.step().has_measure_steps());
}

TEST(MemorySpecBuilderTest, BadFlagsAreNamed) {
  auto check = [](MemoryOptions o, const std::string& prefix) {
    auto spec = BuildMemorySpec(o);
    ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << prefix;
    EXPECT_EQ(std::string(spec.status().message()).rfind(prefix, 0), 0u) << spec.status();
  };
  MemoryOptions o;
  o.contexts = "128,abc";
  check(o, "--contexts: expected positive numbers");
  o = {};
  o.modes = "forward,sideways";
  check(o, "--modes: unknown mode 'sideways'");
  o = {};
  o.precisions = "fp8";
  check(o, "--precisions: unknown precision 'fp8'");
  o = {};
  o.stacks = "java";
  check(o, "--stacks: unknown value 'java'");
  o = {};
  o.step.measure_steps = 3;
  check(o, "--steps:");
  o = {};
  o.step.mode = "back";
  check(o, "--mode:");
}

}  // namespace
}  // namespace benchd::client

namespace benchd::client {
namespace {

TEST(MemoryJobViewTest, GetAndFinalLineShowTheMemoryResult) {
  v1::Job job;
  job.set_id("7");
  job.set_kind(v1::JOB_KIND_MEMORY);
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  v1::MemorySpec* m = job.mutable_spec()->mutable_memory();
  m->mutable_step()->mutable_model()->set_preset("small");
  m->mutable_step()->set_batch_size(4);
  m->mutable_step()->set_context_length(128);
  m->set_record_steps(2);
  m->set_stacks(v1::MEMORY_STACKS_CPP);
  m->add_modes(v1::BENCHMARK_MODE_FORWARD);
  m->add_modes(v1::BENCHMARK_MODE_TRAIN_STEP);
  v1::MemoryRun* run = job.mutable_result()->mutable_memory()->add_runs();
  run->set_name("ctx128-forward-fp32");
  run->set_peak_allocated_bytes(int64_t{3} << 30);
  v1::MemoryRun* oom = job.mutable_result()->mutable_memory()->add_runs();
  oom->set_name("ctx128-train_step-fp32");
  oom->set_out_of_memory(true);
  const std::string view = JobView(job);
  EXPECT_NE(
      view.find(
          "small forward/train_step fp32 batch 4 ctx 128, 2 recorded steps (2 runs, stacks cpp)"),
      std::string::npos)
      << view;
  EXPECT_NE(view.find("Peak memory per run"), std::string::npos) << view;
  EXPECT_EQ(FinalStateLine(job),
            "job 7 succeeded: 2 memory runs, highest peak allocated 3.00 GiB, 1 out of memory");
  EXPECT_EQ(ShortSpecSummary(job.spec()).rfind("memory small", 0), 0u);
}

}  // namespace
}  // namespace benchd::client

namespace benchd::client {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(SaveTimelinesTest, FromTheResultOrFetchedAsAnArtifact) {
  char tmpl[] = "/tmp/benchctl-svg-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  v1::Job job;
  job.set_id("9");
  v1::MemoryResult* r = job.mutable_result()->mutable_memory();
  v1::MemoryRun* a = r->add_runs();
  a->set_name("a");
  a->set_timeline_artifact("timeline-a.svg");
  a->set_timeline_svg("<svg>a</svg>");
  v1::MemoryRun* b = r->add_runs();  // left out of the result for size
  b->set_name("b");
  b->set_timeline_artifact("timeline-b.svg");
  v1::MemoryRun* c = r->add_runs();  // left out, and the daemon cannot serve it
  c->set_name("c");
  c->set_timeline_artifact("timeline-c.svg");
  r->add_runs()->set_name("d");  // out of memory before recording: no timeline
  std::vector<std::string> fetched;
  const ArtifactFetcher fetch = [&](const std::string& job_id,
                                    const std::string& name) -> absl::StatusOr<std::string> {
    fetched.push_back(job_id + "/" + name);
    if (name == "timeline-b.svg") return std::string("<svg>b</svg>");
    return absl::NotFoundError("job 9 has no artifact 'timeline-c.svg'");
  };
  const auto lines = SaveTimelines(job, dir, fetch);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "timeline of a saved to " + dir + "/9-timeline-a.svg");
  EXPECT_EQ(Slurp(dir + "/9-timeline-a.svg"), "<svg>a</svg>");
  EXPECT_EQ(Slurp(dir + "/9-timeline-b.svg"), "<svg>b</svg>");
  EXPECT_EQ(fetched, (std::vector<std::string>{"9/timeline-b.svg", "9/timeline-c.svg"}));
  EXPECT_NE(lines[2].find("not in the result, and fetching timeline-c.svg failed: NOT_FOUND"),
            std::string::npos)
      << lines[2];
}

}  // namespace
}  // namespace benchd::client
