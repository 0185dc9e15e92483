#include "common/job_spec.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/number_fields_test_util.h"
#include "common/size_fields_test_util.h"
#include "google/protobuf/descriptor.h"
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
  EXPECT_EQ(b.mode(), v1::BENCHMARK_MODE_FORWARD);
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
  b->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  b->set_precision(v1::PRECISION_BF16);
  b->set_batch_size(8);
  b->set_context_length(256);
  b->set_warmup_steps(2);
  b->set_measure_steps(3);
  b->set_seed(42);
  auto out = ResolveJobSpec(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->device(), "cuda:1");
  EXPECT_EQ(out->benchmark().mode(), v1::BENCHMARK_MODE_TRAIN_STEP);
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
      {"benchmark.warmup_steps", [](v1::BenchmarkSpec* b) { b->set_warmup_steps(kMaxSteps + 1); }},
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

v1::JobSpec Profile(const std::string& preset = "tiny") {
  v1::JobSpec spec;
  spec.mutable_profile()->mutable_step()->mutable_model()->set_preset(preset);
  return spec;
}

TEST(JobSpecTest, ProfileTakesTheBenchmarksStepAndDefaults) {
  auto out = ResolveJobSpec(Profile());
  ASSERT_TRUE(out.ok()) << out.status();
  const v1::ProfileSpec& p = out->profile();
  EXPECT_EQ(JobKindName(*out), "profile");
  EXPECT_EQ(p.profile_steps(), kDefaultProfileSteps);
  EXPECT_EQ(p.step().warmup_steps(), 5);
  EXPECT_EQ(p.step().measure_steps(), 10);
  EXPECT_EQ(p.step().model().d_model(), 64);  // the preset resolved
  EXPECT_TRUE(p.activities().empty());        // the worker picks for its device
}

TEST(JobSpecTest, ProfileRefusals) {
  auto code_and_message = [](const v1::JobSpec& in) {
    auto out = ResolveJobSpec(in);
    EXPECT_FALSE(out.ok());
    return std::make_pair(out.status().code(), std::string(out.status().message()));
  };
  v1::JobSpec in = Profile();
  in.mutable_profile()->mutable_step()->set_cuda_graph(true);
  auto [code, message] = code_and_message(in);
  EXPECT_EQ(code, absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "profile.step.cuda_graph", message);

  in = Profile();
  in.mutable_profile()->set_with_stack(true);
  std::tie(code, message) = code_and_message(in);
  EXPECT_EQ(code, absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "no Python interpreter", message);

  in = Profile();
  in.mutable_profile()->set_profile_steps(0);
  std::tie(code, message) = code_and_message(in);
  EXPECT_EQ(message, "profile.profile_steps: expected 1..100, got 0");

  in = Profile();
  in.mutable_profile()->mutable_step()->set_batch_size(0);
  std::tie(code, message) = code_and_message(in);
  EXPECT_EQ(message, "profile.step.batch_size: expected 1..65536, got 0");

  in = Profile();
  in.mutable_profile()->add_activities(v1::PROFILER_ACTIVITY_CUDA);
  std::tie(code, message) = code_and_message(in);
  EXPECT_PRED_FORMAT2(IsSubstring, "cuda without cpu", message);

  in = Profile();
  in.mutable_profile()->add_activities(v1::PROFILER_ACTIVITY_CPU);
  in.mutable_profile()->add_activities(v1::PROFILER_ACTIVITY_CPU);
  std::tie(code, message) = code_and_message(in);
  EXPECT_EQ(message, "profile.activities[1]: cpu given twice");

  in = Profile();
  in.mutable_profile()->add_activities(static_cast<v1::ProfilerActivity>(7));
  std::tie(code, message) = code_and_message(in);
  EXPECT_EQ(message, "profile.activities[0]: unknown value 7; expected cpu or cuda");
}

TEST(JobSpecTest, ProfileOfCudaActivityNeedsACudaDevice) {
  v1::JobSpec in = Profile();
  in.mutable_profile()->add_activities(v1::PROFILER_ACTIVITY_CPU);
  EXPECT_TRUE(CheckKindForDevice(in, "cpu:0").ok());
  in.mutable_profile()->add_activities(v1::PROFILER_ACTIVITY_CUDA);
  const absl::Status s = CheckKindForDevice(in, "cpu:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_PRED_FORMAT2(IsSubstring, "cuda needs a CUDA device", std::string(s.message()));
  EXPECT_TRUE(CheckKindForDevice(in, "cuda:0").ok());
}

TEST(JobSpecTest, KindNames) {
  v1::JobSpec in;
  EXPECT_EQ(JobKindOf(in), v1::JOB_KIND_UNSPECIFIED);
  EXPECT_EQ(JobKindName(in), "");
  EXPECT_EQ(ResolveJobSpec(in).status().message(),
            "spec: no request kind set; expected one of benchmark, profile, memory, collective, "
            "attention, precision, ddp");
  EXPECT_EQ(JobKindOf(Benchmark()), v1::JOB_KIND_BENCHMARK);
  EXPECT_EQ(JobKindName(Benchmark()), "benchmark");
  in.mutable_collective();
  EXPECT_EQ(JobKindName(in), "collective");
  in.mutable_attention();
  EXPECT_EQ(JobKindOf(in), v1::JOB_KIND_ATTENTION);
  EXPECT_EQ(JobKindName(in), "attention");
  in.mutable_precision();
  EXPECT_EQ(JobKindOf(in), v1::JOB_KIND_PRECISION);
  EXPECT_EQ(JobKindName(in), "precision");
}

v1::JobSpec Memory(const std::string& preset = "tiny") {
  v1::JobSpec spec;
  spec.mutable_memory()->mutable_step()->mutable_model()->set_preset(preset);
  return spec;
}

TEST(MemorySpecTest, DefaultsFilled) {
  auto out = ResolveJobSpec(Memory());
  ASSERT_TRUE(out.ok()) << out.status();
  const v1::MemorySpec& m = out->memory();
  EXPECT_EQ(m.record_steps(), kDefaultMemoryRecordSteps);
  EXPECT_EQ(m.max_entries(), kDefaultMemoryMaxEntries);
  EXPECT_EQ(m.top_allocations(), kDefaultMemoryTopAllocations);
  EXPECT_EQ(m.stacks(), v1::MEMORY_STACKS_CPP);
  // The step is a resolved benchmark step, without a measured-step count.
  EXPECT_EQ(m.step().mode(), v1::BENCHMARK_MODE_FORWARD);
  EXPECT_EQ(m.step().batch_size(), 4);
  EXPECT_EQ(m.step().context_length(), 128);
  EXPECT_EQ(m.step().warmup_steps(), 5);
  EXPECT_FALSE(m.step().has_measure_steps());
  EXPECT_EQ(m.step().model().d_model(), 64);
  EXPECT_EQ(JobKindName(*out), "memory");
}

TEST(MemorySpecTest, SweepRunsInOrder) {
  v1::JobSpec in = Memory();
  in.mutable_memory()->add_context_lengths(128);
  in.mutable_memory()->add_context_lengths(256);
  in.mutable_memory()->add_modes(v1::BENCHMARK_MODE_FORWARD);
  in.mutable_memory()->add_modes(v1::BENCHMARK_MODE_TRAIN_STEP);
  in.mutable_memory()->add_precisions(v1::PRECISION_FP32);
  in.mutable_memory()->add_precisions(v1::PRECISION_BF16);
  in.mutable_memory()->set_record_steps(3);
  auto out = ResolveJobSpec(in);
  ASSERT_TRUE(out.ok()) << out.status();
  auto runs = MemoryRunSpecs(out->memory(), out->memory().step());
  ASSERT_EQ(runs.size(), 8u);
  EXPECT_EQ(MemoryRunName(runs[0]), "ctx128-forward-fp32");
  EXPECT_EQ(MemoryRunName(runs[1]), "ctx128-forward-bf16");
  EXPECT_EQ(MemoryRunName(runs[2]), "ctx128-train_step-fp32");
  EXPECT_EQ(MemoryRunName(runs[7]), "ctx256-train_step-bf16");
  for (const auto& r : runs) EXPECT_EQ(r.measure_steps(), 3);
}

TEST(MemorySpecTest, NoSweepIsOneRunOfTheStep) {
  v1::JobSpec in = Memory();
  in.mutable_memory()->mutable_step()->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  in.mutable_memory()->mutable_step()->set_context_length(64);
  auto out = ResolveJobSpec(in);
  ASSERT_TRUE(out.ok()) << out.status();
  auto runs = MemoryRunSpecs(out->memory(), out->memory().step());
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(MemoryRunName(runs[0]), "ctx64-train_step-fp32");
}

TEST(MemorySpecTest, BadInputNamesTheField) {
  struct Case {
    std::function<void(v1::MemorySpec&)> edit;
    std::string field;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {[](auto& m) { m.set_record_steps(0); }, "memory.record_steps", "expected 1..100, got 0"},
      {[](auto& m) { m.set_max_entries(10); }, "memory.max_entries", "got 10"},
      {[](auto& m) { m.set_top_allocations(0); }, "memory.top_allocations", "got 0"},
      {[](auto& m) { m.set_stacks(v1::MEMORY_STACKS_PYTHON); }, "memory.stacks",
       "no Python interpreter"},
      {[](auto& m) { m.set_stacks(static_cast<v1::MemoryStacks>(42)); }, "memory.stacks",
       "unknown value 42"},
      {[](auto& m) { m.add_context_lengths(-3); }, "memory.context_lengths[0]", "got -3"},
      {[](auto& m) { m.add_modes(static_cast<v1::BenchmarkMode>(9)); }, "memory.modes[0]",
       "unknown value 9"},
      {[](auto& m) { m.add_precisions(v1::PRECISION_UNSPECIFIED); }, "memory.precisions[0]",
       "expected fp32, bf16 or fp16"},
      {[](auto& m) { m.mutable_step()->set_measure_steps(4); }, "memory.step.measure_steps",
       "record_steps"},
      {[](auto& m) { m.mutable_step()->set_cuda_graph(true); }, "memory.step.cuda_graph", ""},
      {[](auto& m) { m.mutable_step()->set_export_parity(true); }, "memory.step.export_parity", ""},
      {[](auto& m) { m.mutable_step()->set_batch_size(0); }, "memory.step.batch_size", "got 0"},
      {[](auto& m) { m.mutable_step()->mutable_model()->set_preset("huge"); },
       "memory.step.model.preset", "huge"},
      // A cell of the sweep that is not a valid step: an optimizer for forward.
      {[](auto& m) {
         m.mutable_step()->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
         m.mutable_step()->set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
         m.add_modes(v1::BENCHMARK_MODE_FORWARD);
       },
       "memory (run ctx128-forward-fp32)", "optimizer_impl"},
  };
  for (const Case& c : cases) {
    v1::JobSpec in = Memory();
    c.edit(*in.mutable_memory());
    auto out = ResolveJobSpec(in);
    ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    const std::string msg(out.status().message());
    EXPECT_EQ(msg.rfind(c.field, 0), 0u) << msg;
    EXPECT_PRED_FORMAT2(IsSubstring, c.detail, msg);
  }
}

TEST(MemorySpecTest, TooBigASweepIsRefused) {
  v1::JobSpec in = Memory();
  for (int i = 1; i <= 9; ++i) in.mutable_memory()->add_context_lengths(16 * i);
  for (auto m : {v1::BENCHMARK_MODE_FORWARD, v1::BENCHMARK_MODE_FORWARD_BACKWARD,
                 v1::BENCHMARK_MODE_TRAIN_STEP})
    in.mutable_memory()->add_modes(m);
  for (auto p : {v1::PRECISION_FP32, v1::PRECISION_BF16, v1::PRECISION_FP16})
    in.mutable_memory()->add_precisions(p);
  auto out = ResolveJobSpec(in);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "81 runs", std::string(out.status().message()));
}

TEST(MemorySpecTest, NeedsACudaDevice) {
  v1::JobSpec in = Memory();
  const absl::Status s = CheckKindForDevice(in, "cpu:0");
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_PRED_FORMAT2(IsSubstring, "memory: needs a CUDA device", std::string(s.message()));
  EXPECT_PRED_FORMAT2(IsSubstring, "cpu:0", std::string(s.message()));
  EXPECT_TRUE(CheckKindForDevice(in, "cuda:1").ok());
  EXPECT_TRUE(CheckKindForDevice(Benchmark(), "cpu:0").ok());
}

}  // namespace
}  // namespace benchd

namespace benchd {
namespace {

v1::JobSpec Collective(std::vector<std::string> devices,
                       v1::CollectiveBackend backend = v1::COLLECTIVE_BACKEND_UNSPECIFIED) {
  v1::JobSpec spec;
  for (auto& d : devices) spec.mutable_collective()->add_devices(d);
  spec.mutable_collective()->set_backend(backend);
  return spec;
}

void ExpectInvalid(const v1::JobSpec& spec, const std::string& part) {
  auto out = ResolveJobSpec(spec);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_NE(out.status().message().find(part), std::string::npos) << out.status().message();
}

TEST(CollectiveSpecTest, DefaultsWrittenOut) {
  auto out = ResolveJobSpec(Collective({"cpu:0", "cpu:1"}));
  ASSERT_TRUE(out.ok()) << out.status();
  const auto& c = out->collective();
  ASSERT_EQ(c.targets_size(), 1);
  EXPECT_EQ(c.targets(0).backend(), v1::COLLECTIVE_BACKEND_GLOO);  // cpu -> gloo
  EXPECT_EQ(c.devices_size(), 0);                                  // folded into targets
  EXPECT_EQ(c.op(), v1::COLLECTIVE_OP_ALL_REDUCE);
  EXPECT_EQ(c.dtype(), v1::COLLECTIVE_DTYPE_FP32);
  EXPECT_EQ(c.sizes_bytes_size(), 1);
  EXPECT_EQ(c.sizes_bytes(0), 1 << 20);
  EXPECT_EQ(c.warmup_iters(), 5);
  EXPECT_EQ(c.iters(), 20);
  EXPECT_TRUE(c.in_place());  // c10d all_reduce is in place
  EXPECT_DOUBLE_EQ(c.timeout_seconds(), 300);
  // Resolving the resolved spec changes nothing (the worker checks it again).
  auto again = ResolveJobSpec(*out);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), out->SerializeAsString());
  EXPECT_EQ(ResolveJobSpec(Collective({"cuda:0", "cuda:1"}))->collective().targets(0).backend(),
            v1::COLLECTIVE_BACKEND_NCCL);
}

TEST(CollectiveSpecTest, SweepsExpand) {
  v1::JobSpec spec = Collective({"cuda:0", "cuda:1", "cuda:2", "cuda:3"});
  auto* c = spec.mutable_collective();
  c->add_backends(v1::COLLECTIVE_BACKEND_NCCL);
  c->add_backends(v1::COLLECTIVE_BACKEND_GLOO);
  c->add_world_sizes(2);
  c->add_world_sizes(4);
  c->set_min_bytes(1 << 20);
  c->set_max_bytes(1 << 30);
  auto out = ResolveJobSpec(spec);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->collective().sizes_bytes_size(), 11);
  EXPECT_FALSE(out->collective().has_min_bytes());
  auto series = CollectiveSeries(out->collective());
  ASSERT_EQ(series.size(), 4u);
  EXPECT_EQ(series[0].backend(), v1::COLLECTIVE_BACKEND_NCCL);
  EXPECT_EQ(series[0].devices_size(), 2);
  EXPECT_EQ(series[1].devices_size(), 4);
  EXPECT_EQ(series[2].backend(), v1::COLLECTIVE_BACKEND_GLOO);
  EXPECT_EQ(CollectiveDevices(out->collective()),
            std::vector<std::string>({"cuda:0", "cuda:1", "cuda:2", "cuda:3"}));
}

TEST(CollectiveSpecTest, ClusterMembersDevicesAreDevices) {
  // Which members serve them is the daemon's check (server/cluster/cluster_workers.h).
  auto out = ResolveJobSpec(Collective({"cuda:0", "node1/cuda:0"}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->collective().targets(0).backend(), v1::COLLECTIVE_BACKEND_NCCL);
}

TEST(CollectiveSpecTest, BadInputNamed) {
  ExpectInvalid(Collective({"cpu:0", "cpu:1"}, v1::COLLECTIVE_BACKEND_NCCL),
                "nccl needs CUDA devices");
  ExpectInvalid(Collective({"cpu:0", "cpu:0"}), "cpu:0 appears twice");
  ExpectInvalid(Collective({"cpu:0"}), "world size 1");
  ExpectInvalid(Collective({"cpu:0", "cuda:1"}), "mixes cpu and cuda");
  ExpectInvalid(Collective({"gpu0", "cpu:1"}), "'gpu0' is not a device name");
  ExpectInvalid(Collective({"Node1/cpu:0", "cpu:1"}), "'Node1/cpu:0' is not a device name");
  ExpectInvalid(Collective({"node1/cuda:0", "cpu:1"}), "mixes cpu and cuda");
  ExpectInvalid(Collective({"node1/cpu:0", "node2/cpu:0"}, v1::COLLECTIVE_BACKEND_NCCL),
                "nccl needs CUDA devices");
  v1::JobSpec empty;
  empty.mutable_collective();
  ExpectInvalid(empty, "nothing to run on");
  v1::JobSpec s = Collective({"cpu:0", "cpu:1"});
  s.mutable_collective()->set_min_bytes(1 << 20);
  s.mutable_collective()->set_max_bytes(1 << 10);
  ExpectInvalid(s, "is more than max_bytes");
  s = Collective({"cpu:0", "cpu:1"});
  s.mutable_collective()->set_factor(1);
  ExpectInvalid(s, "collective.factor: expected 2..1024, got 1");
  s = Collective({"cpu:0", "cpu:1"});
  s.mutable_collective()->set_op(static_cast<v1::CollectiveOp>(42));
  ExpectInvalid(s, "collective.op: unknown value 42");
  s = Collective({"cpu:0", "cpu:1"});
  s.mutable_collective()->set_op(v1::COLLECTIVE_OP_ALL_TO_ALL);
  s.mutable_collective()->set_in_place(true);
  ExpectInvalid(s, "no in-place form");
  s = Collective({"cpu:0", "cpu:1"});
  s.mutable_collective()->add_world_sizes(3);
  ExpectInvalid(s, "3 ranks need 3 devices");
  s = Collective({"cpu:0", "cpu:1"});
  s.mutable_collective()->add_world_sizes(1);
  ExpectInvalid(s, "expected 2 or more ranks");
  s = Collective({"cpu:0", "cpu:1"});
  s.mutable_collective()->add_sizes_bytes(0);
  ExpectInvalid(s, "sizes_bytes[0]: expected 1..");
  s = Collective({"cpu:0", "cpu:1"});
  s.mutable_collective()->set_iters(0);
  ExpectInvalid(s, "collective.iters: expected 1..100000, got 0");
  s = Collective({"cpu:0", "cpu:1"});
  s.set_device("cpu:0");
  ExpectInvalid(s, "spec.device");
  v1::JobSpec g;
  g.mutable_collective()->set_group("g1");
  g.mutable_collective()->add_world_sizes(2);
  ExpectInvalid(g, "a group has one world size");
  g.mutable_collective()->clear_world_sizes();
  auto ok = ResolveJobSpec(g);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->collective().targets(0).group(), "g1");
}

// Every float and double of a request, found through the descriptors (so a
// field added later is walked too), refuses NaN and +-inf naming the field.
TEST(FiniteNumbersTest, EveryNumberFieldOfAJobSpecRefusesNanAndInfNamingIt) {
  const auto paths = testing::NumberFieldPaths(v1::JobSpec::descriptor());
  std::vector<std::string> names;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& path : paths) {
    for (const auto& [value, text] :
         std::vector<std::pair<double, std::string>>{{nan, "nan"}, {inf, "inf"}, {-inf, "-inf"}}) {
      v1::JobSpec spec;
      const std::string field = testing::SetNumberAt(&spec, path, value);
      if (std::isnan(value)) names.push_back(field);
      auto out = ResolveJobSpec(spec);
      ASSERT_FALSE(out.ok()) << field << " = " << text << " was accepted";
      EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << field;
      EXPECT_EQ(out.status().message(),
                absl::StrCat(field, ": expected a finite number, got ", text));
    }
  }
  // The walk finds the fields there are today.
  EXPECT_NE(std::find(names.begin(), names.end(), "benchmark.model.rope_theta"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "profile.step.model.rope_theta"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "memory.step.model.rope_theta"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "collective.timeout_seconds"), names.end());
}

TEST(FiniteNumbersTest, FiniteValuesAndUnsetFieldsPass) {
  v1::JobSpec spec = Benchmark();
  spec.mutable_benchmark()->mutable_model()->set_rope_theta(500000);
  EXPECT_TRUE(CheckFiniteNumbers(spec).ok());
  EXPECT_TRUE(CheckFiniteNumbers(v1::JobSpec()).ok());
  v1::CreateGroupRequest group;
  group.set_timeout_seconds(std::numeric_limits<double>::infinity());
  EXPECT_EQ(CheckFiniteNumbers(group).message(),
            "timeout_seconds: expected a finite number, got inf");
}

TEST(TimeoutSecondsTest, ZeroIsTheDefaultOutOfRangeIsRefusedNeverReplaced) {
  EXPECT_EQ(*ResolveTimeoutSeconds("t", 0), 300);
  EXPECT_EQ(*ResolveTimeoutSeconds("t", 1), 1);
  EXPECT_EQ(*ResolveTimeoutSeconds("t", 86400), 86400);
  EXPECT_EQ(ResolveTimeoutSeconds("t", -1).status().message(),
            "t: expected 0 (= 300) or 1..86400, got -1");
  for (double bad :
       {-1.0, 0.5, 86401.0, std::numeric_limits<double>::quiet_NaN(),
        std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(ResolveTimeoutSeconds("t", bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(CollectiveSpecTest, TimeoutOutOfRangeIsRefusedZeroIsTheDefault) {
  v1::JobSpec s = Collective({"cpu:0", "cpu:1"});
  s.mutable_collective()->set_timeout_seconds(-1);
  ExpectInvalid(s, "collective.timeout_seconds: expected 0 (= 300) or 1..86400, got -1");
  s.mutable_collective()->set_timeout_seconds(86401);
  ExpectInvalid(s, "collective.timeout_seconds: expected 0 (= 300) or 1..86400, got 86401");
  s.mutable_collective()->set_timeout_seconds(std::nan(""));
  ExpectInvalid(s, "collective.timeout_seconds: expected a finite number, got nan");
  s.mutable_collective()->set_timeout_seconds(0);
  auto out = ResolveJobSpec(s);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_DOUBLE_EQ(out->collective().timeout_seconds(), 300);
  s.mutable_collective()->set_timeout_seconds(30);
  EXPECT_DOUBLE_EQ(ResolveJobSpec(s)->collective().timeout_seconds(), 30);
}

// The options a CPU cannot run are refused at Submit (CheckKindForDevice), by
// the same rule the worker applies (CheckStepOptionsForDevice).
absl::Status ForDevice(const v1::JobSpec& spec, const std::string& device) {
  auto resolved = ResolveJobSpec(spec);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return CheckKindForDevice(*resolved, device);
}

TEST(OptionsForDeviceTest, CudaOnlyOptionsAreRefusedOnACpuNamingTheField) {
  v1::JobSpec graph = Benchmark();
  graph.mutable_benchmark()->set_cuda_graph(true);
  EXPECT_TRUE(ForDevice(graph, "cuda:0").ok());
  absl::Status s = ForDevice(graph, "cpu:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "benchmark.cuda_graph: CUDA graphs need a CUDA device; this worker serves cpu:0");

  for (auto a : {v1::ATTENTION_IMPL_SDPA_EFFICIENT, v1::ATTENTION_IMPL_SDPA_CUDNN}) {
    v1::JobSpec spec = Benchmark();
    spec.mutable_benchmark()->set_attention(a);
    spec.mutable_benchmark()->set_precision(v1::PRECISION_BF16);
    EXPECT_TRUE(ForDevice(spec, "cuda:1").ok()) << a;
    s = ForDevice(spec, "cpu:2");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << a;
    EXPECT_PRED_FORMAT2(IsSubstring, "benchmark.attention: the", std::string(s.message()));
    EXPECT_PRED_FORMAT2(IsSubstring, "is a CUDA kernel and cpu:2 is a CPU",
                        std::string(s.message()));
    // A profile's step the same, named as its field.
    v1::JobSpec profile;
    *profile.mutable_profile()->mutable_step() = spec.benchmark();
    s = ForDevice(profile, "cpu:0");
    EXPECT_PRED_FORMAT2(IsSubstring, "profile.step.attention: the", std::string(s.message()));
  }
  for (auto a : {v1::ATTENTION_IMPL_SDPA, v1::ATTENTION_IMPL_SDPA_FLASH,
                 v1::ATTENTION_IMPL_SDPA_MATH, v1::ATTENTION_IMPL_FAITHFUL}) {
    v1::JobSpec spec = Benchmark();
    spec.mutable_benchmark()->set_attention(a);
    EXPECT_TRUE(ForDevice(spec, "cpu:0").ok()) << a;
  }
}

TEST(OptionsForDeviceTest, HalfPrecisionKernelsAreRefusedInFp32OnCuda) {
  v1::JobSpec spec = Benchmark();
  spec.mutable_benchmark()->set_attention(v1::ATTENTION_IMPL_SDPA_FLASH);
  absl::Status s = ForDevice(spec, "cuda:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "benchmark.attention: the", std::string(s.message()));
  EXPECT_PRED_FORMAT2(IsSubstring, "fp16/bf16 inputs only", std::string(s.message()));
  spec.mutable_benchmark()->set_precision(v1::PRECISION_BF16);
  EXPECT_TRUE(ForDevice(spec, "cuda:0").ok());
  // A memory sweep: each run has its own precision.
  v1::JobSpec memory;
  *memory.mutable_memory()->mutable_step() = spec.benchmark();
  memory.mutable_memory()->add_precisions(v1::PRECISION_BF16);
  EXPECT_TRUE(ForDevice(memory, "cuda:0").ok());
  memory.mutable_memory()->add_precisions(v1::PRECISION_FP32);
  s = ForDevice(memory, "cuda:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "fp32): memory.step.attention", std::string(s.message()));
}

// benchd's fused kernels: CUDA only (float32 included: they have fp32
// kernels), head dims 16, 32, 64 and 128 only; every request that picks an
// attention names its own field.
TEST(OptionsForDeviceTest, FusedNeedsCudaAndAHeadDimItsKernelsHave) {
  for (auto precision : {v1::PRECISION_FP32, v1::PRECISION_BF16, v1::PRECISION_FP16}) {
    v1::JobSpec spec = Benchmark();  // tiny: d_model 64 / 4 heads = 16
    spec.mutable_benchmark()->set_attention(v1::ATTENTION_IMPL_FUSED);
    spec.mutable_benchmark()->set_precision(precision);
    EXPECT_TRUE(ForDevice(spec, "cuda:0").ok()) << static_cast<int>(precision);
    absl::Status s = ForDevice(spec, "cpu:0");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              "benchmark.attention: fused is benchd's FlashAttention-2 CUDA kernels and cpu:0 is a "
              "CPU; on a CPU use tiled (the same algorithm in ATen ops), faithful, sdpa, flash or "
              "math");
    v1::JobSpec profile;
    *profile.mutable_profile()->mutable_step() = spec.benchmark();
    s = ForDevice(profile, "cpu:0");
    EXPECT_PRED_FORMAT2(IsSubstring, "profile.step.attention: fused is", std::string(s.message()));
  }
  for (int64_t heads : {1, 2, 4}) {  // d_model 128: head dims 128, 64, 32
    v1::JobSpec spec = Benchmark();
    spec.mutable_benchmark()->mutable_model()->set_d_model(128);
    spec.mutable_benchmark()->mutable_model()->set_num_heads(heads);
    spec.mutable_benchmark()->set_attention(v1::ATTENTION_IMPL_FUSED);
    EXPECT_TRUE(ForDevice(spec, "cuda:1").ok()) << heads;
  }
  v1::JobSpec spec = Benchmark();
  spec.mutable_benchmark()->mutable_model()->set_d_model(160);
  spec.mutable_benchmark()->mutable_model()->set_num_heads(2);  // head dim 80
  spec.mutable_benchmark()->set_attention(v1::ATTENTION_IMPL_FUSED);
  spec.mutable_benchmark()->set_precision(v1::PRECISION_BF16);
  absl::Status s = ForDevice(spec, "cuda:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "benchmark.attention: fused (benchd's FlashAttention-2 kernels) takes head dims 16, "
            "32, 64 or 128 and this job's is 80; use tiled, sdpa or faithful for it");
  spec.mutable_benchmark()->set_attention(v1::ATTENTION_IMPL_TILED);
  EXPECT_TRUE(ForDevice(spec, "cuda:0").ok());

  // The attention request: its head_dim, causal or not.
  v1::JobSpec a;
  a.mutable_attention()->set_implementation(v1::ATTENTION_IMPL_FUSED);
  a.mutable_attention()->set_head_dim(128);
  for (bool causal : {false, true}) {
    a.mutable_attention()->set_causal(causal);
    EXPECT_TRUE(ForDevice(a, "cuda:0").ok()) << causal;  // fp32 (the default) too
  }
  s = ForDevice(a, "cpu:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "attention.implementation: fused is benchd's FlashAttention-2 CUDA kernels "
                      "and cpu:0 is a CPU",
                      std::string(s.message()));
  a.mutable_attention()->set_head_dim(96);
  s = ForDevice(a, "cuda:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "attention.implementation: fused (benchd's FlashAttention-2 kernels) takes "
                      "head dims 16, 32, 64 or 128 and this job's is 96",
                      std::string(s.message()));
}

}  // namespace
}  // namespace benchd

namespace benchd {
namespace {

TEST(ProgressTimeoutTest, ZeroOrOneToADayElseRefusedNamingTheField) {
  v1::JobSpec s;
  s.mutable_benchmark()->mutable_model()->set_preset("tiny");
  for (double good : {0.0, 1.0, 3.5, 86400.0}) {
    s.set_progress_timeout_seconds(good);
    auto out = ResolveJobSpec(s);
    ASSERT_TRUE(out.ok()) << good << ": " << out.status();
    EXPECT_EQ(out->progress_timeout_seconds(), good);  // 0 is the daemon's to fill in
  }
  s.set_progress_timeout_seconds(-1);
  auto out = ResolveJobSpec(s);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            "progress_timeout_seconds: expected 0 (= the daemon's default for the kind) or "
            "1..86400, got -1");
  for (double bad : {0.5, 86401.0, std::nan("")}) {
    s.set_progress_timeout_seconds(bad);
    EXPECT_EQ(ResolveJobSpec(s).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ProgressTimeoutTest, DefaultsPerKind) {
  v1::JobSpec s;
  s.mutable_benchmark();
  EXPECT_EQ(DefaultProgressTimeoutSeconds(s), 600);
  s.mutable_profile();
  EXPECT_EQ(DefaultProgressTimeoutSeconds(s), 900);
  s.mutable_memory();
  EXPECT_EQ(DefaultProgressTimeoutSeconds(s), 900);
  s.mutable_collective();
  EXPECT_EQ(DefaultProgressTimeoutSeconds(s), 600);
  s.mutable_attention();
  EXPECT_EQ(DefaultProgressTimeoutSeconds(s), 600);
  s.mutable_precision();
  EXPECT_EQ(DefaultProgressTimeoutSeconds(s), 600);
}

TEST(PrecisionSpecTest, DefaultsWrittenOut) {
  v1::JobSpec in;
  in.mutable_precision();
  auto out = ResolveJobSpec(in);
  ASSERT_TRUE(out.ok()) << out.status();
  const v1::PrecisionSpec& p = out->precision();
  ASSERT_EQ(p.experiments_size(), 2);
  EXPECT_EQ(p.experiments(0), v1::PRECISION_EXPERIMENT_ACCUMULATION);
  EXPECT_EQ(p.experiments(1), v1::PRECISION_EXPERIMENT_AUTOCAST);
  ASSERT_EQ(p.autocast_dtypes_size(), 2);
  EXPECT_EQ(p.autocast_dtypes(0), v1::PRECISION_BF16);
  EXPECT_EQ(p.autocast_dtypes(1), v1::PRECISION_FP16);
  EXPECT_EQ(p.count(), 1000);
  EXPECT_EQ(p.addend(), 0.01);
  EXPECT_EQ(p.seed(), 0u);
  // Resolved is a fixed point.
  EXPECT_EQ(ResolveJobSpec(*out)->DebugString(), out->DebugString());
  EXPECT_EQ(JobKindOf(*out), v1::JOB_KIND_PRECISION);
  // Runs anywhere.
  EXPECT_TRUE(CheckKindForDevice(*out, "cpu:0").ok());
  EXPECT_TRUE(CheckKindForDevice(*out, "cuda:0").ok());
}

TEST(PrecisionSpecTest, WhatIsGivenIsKeptInOrder) {
  v1::JobSpec in;
  v1::PrecisionSpec* p = in.mutable_precision();
  p->add_experiments(v1::PRECISION_EXPERIMENT_AUTOCAST);
  p->add_autocast_dtypes(v1::PRECISION_FP16);
  p->add_autocast_dtypes(v1::PRECISION_BF16);
  p->set_count(3);
  p->set_addend(-0.25);
  auto out = ResolveJobSpec(in);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->precision().experiments_size(), 1);
  EXPECT_EQ(out->precision().experiments(0), v1::PRECISION_EXPERIMENT_AUTOCAST);
  EXPECT_EQ(out->precision().autocast_dtypes(0), v1::PRECISION_FP16);
  EXPECT_EQ(out->precision().autocast_dtypes(1), v1::PRECISION_BF16);
  EXPECT_EQ(out->precision().count(), 3);
  EXPECT_EQ(out->precision().addend(), -0.25);
}

TEST(PrecisionSpecTest, BadInputNamesTheFieldWhatCameAndWhatIsAccepted) {
  struct Case {
    std::function<void(v1::PrecisionSpec*)> set;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto* p) { p->add_experiments(v1::PRECISION_EXPERIMENT_UNSPECIFIED); },
       "precision.experiments[0]: unknown value 0; expected accumulation or autocast"},
      {[](auto* p) {
         p->add_experiments(v1::PRECISION_EXPERIMENT_AUTOCAST);
         p->add_experiments(v1::PRECISION_EXPERIMENT_AUTOCAST);
       },
       "precision.experiments[1]: autocast is given twice; expected accumulation and autocast, "
       "each at most once"},
      {[](auto* p) { p->add_autocast_dtypes(v1::PRECISION_FP32); },
       "precision.autocast_dtypes[0]: fp32 is not an autocast dtype (autocast casts to a lower "
       "precision); expected bf16 or fp16"},
      {[](auto* p) { p->add_autocast_dtypes(v1::Precision(7)); },
       "precision.autocast_dtypes[0]: unknown value 7; expected bf16 or fp16"},
      {[](auto* p) {
         p->add_autocast_dtypes(v1::PRECISION_BF16);
         p->add_autocast_dtypes(v1::PRECISION_BF16);
       },
       "precision.autocast_dtypes[1]: bf16 is given twice; expected bf16 and fp16, each at most "
       "once"},
      {[](auto* p) { p->set_count(0); }, "precision.count: expected 1..1000000, got 0"},
      {[](auto* p) { p->set_count(1000001); }, "precision.count: expected 1..1000000, got 1000001"},
      {[](auto* p) { p->set_addend(0); },
       "precision.addend: expected a number other than 0 with |addend| <= 65504 (fp16's largest "
       "finite value), got 0"},
      {[](auto* p) { p->set_addend(-70000); },
       "precision.addend: expected a number other than 0 with |addend| <= 65504 (fp16's largest "
       "finite value), got -70000"},
      {[](auto* p) { p->set_addend(std::numeric_limits<double>::infinity()); },
       "precision.addend: expected a finite number, got inf"},
  };
  for (const Case& c : cases) {
    v1::JobSpec in;
    c.set(in.mutable_precision());
    auto out = ResolveJobSpec(in);
    ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(out.status().message(), c.message);
  }
  // Three entries of a two-entry list: the size limit.
  v1::JobSpec in;
  for (int i = 0; i < 3; ++i) in.mutable_precision()->add_autocast_dtypes(v1::PRECISION_BF16);
  auto out = ResolveJobSpec(in);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "precision.autocast_dtypes",
                      std::string(out.status().message()));
}

TEST(PrecisionSpecTest, ExperimentNames) {
  EXPECT_EQ(PrecisionExperimentName(v1::PRECISION_EXPERIMENT_ACCUMULATION), "accumulation");
  EXPECT_EQ(PrecisionExperimentName(v1::PRECISION_EXPERIMENT_AUTOCAST), "autocast");
  EXPECT_EQ(*ParsePrecisionExperiment("Autocast"), v1::PRECISION_EXPERIMENT_AUTOCAST);
  EXPECT_EQ(*ParsePrecisionExperiment("PRECISION_EXPERIMENT_ACCUMULATION"),
            v1::PRECISION_EXPERIMENT_ACCUMULATION);
  for (const char* bad : {"", "unspecified", "PRECISION_EXPERIMENT_UNSPECIFIED", "speed"}) {
    EXPECT_EQ(ParsePrecisionExperiment(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(ParsePrecisionExperiment("speed").status().message(),
            "unknown experiment 'speed'; expected accumulation or autocast");
}

TEST(AttentionSpecTest, DefaultsWrittenOut) {
  v1::JobSpec in;
  in.mutable_attention();
  auto out = ResolveJobSpec(in);
  ASSERT_TRUE(out.ok()) << out.status();
  const v1::AttentionSpec& a = out->attention();
  EXPECT_EQ(a.batch_size(), 8);
  EXPECT_FALSE(a.has_num_heads());  // no head dimension, as the course
  EXPECT_EQ(a.head_dim(), 64);
  EXPECT_EQ(a.seq_len(), 1024);
  EXPECT_EQ(a.precision(), v1::PRECISION_FP32);
  EXPECT_EQ(a.implementation(), v1::ATTENTION_IMPL_FAITHFUL);
  EXPECT_EQ(a.warmup_passes(), 5);
  EXPECT_EQ(a.passes(), 100);
  EXPECT_FALSE(a.has_memory_cap_bytes());
  // Resolved is a fixed point.
  EXPECT_EQ(ResolveJobSpec(*out)->DebugString(), out->DebugString());
  EXPECT_EQ(JobKindOf(*out), v1::JOB_KIND_ATTENTION);
}

TEST(AttentionSpecTest, TheCoursesLargestCellPassesAndAbsurdSizesAreRefused) {
  v1::JobSpec s;
  v1::AttentionSpec* a = s.mutable_attention();
  a->set_seq_len(16384);
  a->set_head_dim(128);
  EXPECT_TRUE(ResolveJobSpec(s).ok());
  // One score matrix past 2^34 elements: each size is in range, the product is not.
  a->set_batch_size(65);
  auto out = ResolveJobSpec(s);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("attention.seq_len: one score matrix (batch_size x "
                                        "num_heads x seq_len^2 = 65 x 1 x 16384^2)"),
            std::string::npos)
      << out.status();
  // Q past 2^32 elements with a small score matrix.
  a->set_batch_size(kMaxAttentionBatch);
  a->set_seq_len(2048);  // the score matrix at its bound, 2^34 elements: accepted
  a->set_head_dim(kMaxAttentionHeadDim);
  out = ResolveJobSpec(s);
  ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("attention.head_dim: each of Q, K, V"), std::string::npos)
      << out.status();
  // The largest of every size at once does not overflow into acceptance.
  a->set_num_heads(kMaxAttentionHeads);
  a->set_seq_len(kMaxContext);
  EXPECT_EQ(ResolveJobSpec(s).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AttentionSpecTest, DeviceRulesNameTheField) {
  v1::JobSpec s;
  s.mutable_attention()->set_implementation(v1::ATTENTION_IMPL_SDPA_FLASH);
  auto fp32 = ResolveJobSpec(s);
  ASSERT_TRUE(fp32.ok());
  // The benchmark's rule: flash and cudnn take half precision on CUDA.
  absl::Status st = CheckKindForDevice(*fp32, "cuda:0");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("attention.implementation: the flash SDPA backend takes fp16/bf16"),
            std::string::npos)
      << st;
  EXPECT_TRUE(CheckKindForDevice(*fp32, "cpu:0").ok());  // ATen's CPU flash kernel runs fp32
  s.mutable_attention()->set_precision(v1::PRECISION_BF16);
  EXPECT_TRUE(CheckKindForDevice(*ResolveJobSpec(s), "cuda:0").ok());
  s.mutable_attention()->set_implementation(v1::ATTENTION_IMPL_SDPA_EFFICIENT);
  st = CheckKindForDevice(*ResolveJobSpec(s), "cpu:0");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("attention.implementation: the efficient SDPA backend is a CUDA"),
            std::string::npos)
      << st;
  // A memory cap is the CUDA caching allocator's: refused on a CPU, not faked.
  s.mutable_attention()->set_implementation(v1::ATTENTION_IMPL_FAITHFUL);
  s.mutable_attention()->set_memory_cap_bytes(int64_t{1} << 30);
  st = CheckKindForDevice(*ResolveJobSpec(s), "cpu:0");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("attention.memory_cap_bytes: a cap is the CUDA caching allocator"),
            std::string::npos)
      << st;
  EXPECT_TRUE(CheckKindForDevice(*ResolveJobSpec(s), "cuda:1").ok());
}

}  // namespace
}  // namespace benchd

namespace benchd {
namespace {

// Found reading the code and confirmed under UBSan (fuzz/corpus/job_spec/
// repro-memory-sweep-runs-overflow): the run count wrapped negative and the
// 64-run limit let a sweep of billions of runs through.
// Each list is now refused past kMaxMemoryRuns entries before the product
// is taken; at the limit the product (64^3) is counted exactly and refused.
TEST(MemorySpecTest, AHugeSweepIsRefusedNotWrappedAround) {
  v1::JobSpec s;
  v1::MemorySpec* m = s.mutable_memory();
  m->mutable_step()->mutable_model()->set_preset("tiny");
  for (int i = 0; i < 1300; ++i) {
    m->add_context_lengths(16);
    m->add_modes(v1::BENCHMARK_MODE_FORWARD);
    m->add_precisions(v1::PRECISION_FP32);
  }
  auto out = ResolveJobSpec(s);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            "memory.context_lengths: expected at most 64 entries (one entry per run of the "
            "sweep), got 1300");
  m->mutable_context_lengths()->Truncate(kMaxMemoryRuns);
  m->mutable_modes()->Truncate(kMaxMemoryRuns);
  m->mutable_precisions()->Truncate(kMaxMemoryRuns);
  out = ResolveJobSpec(s);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("the sweep has 262144 runs"), std::string::npos)
      << out.status();
}

}  // namespace
}  // namespace benchd

// ------------------------------------------------------- limits (common/limits.h)

namespace benchd {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

const google::protobuf::ServiceDescriptor* BenchServiceDescriptor() {
  return v1::SubmitRequest::descriptor()->file()->FindServiceByName("Bench");
}

std::unique_ptr<Message> New(const Descriptor* type) {
  return std::unique_ptr<Message>(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(type)->New());
}

// Every string and list of every request of the service has its own row in
// limits.h, so a field added later gets its limit on purpose; no row is stale.
// A list of an enum's values, each at most once, is as long as the enum
// (less UNSPECIFIED): a request naming every value must pass. (Not
// PrecisionSpec.autocast_dtypes, which takes two of Precision's values.)
TEST(SizeLimitsTest, EnumListsHoldEveryValueOfTheirEnum) {
  for (const char* name :
       {"benchd.v1.DdpSpec.variants", "benchd.v1.DdpSpec.optimizers",
        "benchd.v1.DdpSpec.gradient_compressions", "benchd.v1.PrecisionSpec.experiments"}) {
    const auto* f = google::protobuf::DescriptorPool::generated_pool()->FindFieldByName(name);
    ASSERT_NE(f, nullptr) << name;
    ASSERT_NE(f->enum_type(), nullptr) << name;
    const FieldLimit* row = FindFieldLimit(kListLimits, name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_EQ(row->max, f->enum_type()->value_count() - 1) << name;
  }
}

TEST(SizeLimitsTest, EveryStringAndListOfEveryRequestHasARow) {
  std::set<std::string> strings, lists;
  for (const Descriptor* type : testing::RequestTypes(BenchServiceDescriptor())) {
    for (const testing::FieldPath& path : testing::SizeFieldPaths(type)) {
      const FieldDescriptor* f = path.back();
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
        strings.insert(f->full_name());
        EXPECT_NE(FindFieldLimit(kStringLimits, f->full_name()), nullptr)
            << f->full_name() << ": a string with no row in common/limits.h kStringLimits";
      }
      if (f->is_repeated()) {
        lists.insert(f->full_name());
        EXPECT_NE(FindFieldLimit(kListLimits, f->full_name()), nullptr)
            << f->full_name() << ": a list with no row in common/limits.h kListLimits";
      }
    }
  }
  for (const FieldLimit& row : kStringLimits) {
    EXPECT_EQ(strings.count(std::string(row.field)), 1u) << row.field << ": no request has it";
  }
  for (const FieldLimit& row : kListLimits) {
    EXPECT_EQ(lists.count(std::string(row.field)), 1u) << row.field << ": no request has it";
  }
  // The walk finds the fields there are today.
  EXPECT_EQ(strings.count("benchd.v1.CollectiveTarget.devices"), 1u);
  EXPECT_EQ(lists.count("benchd.v1.CollectiveSpec.sizes_bytes"), 1u);
  EXPECT_EQ(strings.count("benchd.v1.EvictModelRequest.key"), 1u);
}

// The table: one value over its limit per string and list of every request
// (found through the descriptors, so every field today and any added later):
// a string one byte over and a megabyte over, a list one entry over. Each is
// refused naming the field's path, what came (a string quoted, cut short)
// and the limit; at the limit it passes. A JobSpec field is refused by
// ResolveJobSpec itself, with the same message.
TEST(SizeLimitsTest, EveryFieldOverItsLimitIsRefusedNamingItAndAtItsLimitPasses) {
  int strings = 0, lists = 0;
  for (const Descriptor* type : testing::RequestTypes(BenchServiceDescriptor())) {
    for (const testing::FieldPath& path : testing::SizeFieldPaths(type)) {
      const FieldDescriptor* f = path.back();
      // The same request without the SubmitRequest around its JobSpec.
      const bool in_spec = type == v1::SubmitRequest::descriptor();
      const testing::FieldPath spec_path(path.begin() + (in_spec ? 1 : 0), path.end());
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
        ++strings;
        const FieldLimit* limit = FindFieldLimit(kStringLimits, f->full_name());
        ASSERT_NE(limit, nullptr) << f->full_name();
        for (const size_t bytes : {static_cast<size_t>(limit->max) + 1, size_t{1} << 20}) {
          auto m = New(type);
          const std::string field = testing::SetStringAt(m.get(), path, bytes);
          const absl::Status s = CheckSizeLimits(*m);
          ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field << " " << bytes;
          const std::string quoted = bytes <= kMaxQuotedBytes
                                         ? absl::StrCat("'", std::string(bytes, 'x'), "'")
                                         : absl::StrCat("'", std::string(kMaxQuotedBytes, 'x'),
                                                        "'... (", bytes, " bytes)");
          EXPECT_EQ(s.message(), absl::StrCat(field, ": expected ", limit->what, " of at most ",
                                              limit->max, " bytes, got ", quoted));
          if (in_spec) {
            v1::JobSpec spec;
            const std::string spec_field = testing::SetStringAt(&spec, spec_path, bytes);
            EXPECT_EQ(field, "spec." + spec_field);
            EXPECT_EQ(ResolveJobSpec(spec).status(), CheckSizeLimits(spec)) << spec_field;
            EXPECT_EQ(CheckSizeLimits(spec).message(), s.message().substr(5));
          }
        }
        auto at = New(type);
        const std::string field = testing::SetStringAt(at.get(), path, limit->max);
        EXPECT_TRUE(CheckSizeLimits(*at).ok()) << field << " at its limit";
      }
      if (f->is_repeated()) {
        ++lists;
        const FieldLimit* limit = FindFieldLimit(kListLimits, f->full_name());
        ASSERT_NE(limit, nullptr) << f->full_name();
        auto m = New(type);
        const int n = static_cast<int>(limit->max) + 1;
        const std::string field = testing::AddEntriesAt(m.get(), path, n);
        const absl::Status s = CheckSizeLimits(*m);
        ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
        EXPECT_EQ(s.message(), absl::StrCat(field, ": expected at most ", limit->max, " entries (",
                                            limit->what, "), got ", n));
        if (in_spec) {
          v1::JobSpec spec;
          testing::AddEntriesAt(&spec, spec_path, n);
          EXPECT_EQ(ResolveJobSpec(spec).status(), CheckSizeLimits(spec)) << field;
        }
        auto at = New(type);
        testing::AddEntriesAt(at.get(), path, static_cast<int>(limit->max));
        EXPECT_TRUE(CheckSizeLimits(*at).ok()) << field << " at its limit";
      }
    }
  }
  EXPECT_GE(strings, 20);
  EXPECT_GE(lists, 11);
}

// A field this build does not know would be stored with the job and shown
// as if it had run: refused, naming where it was and its number.
TEST(SizeLimitsTest, UnknownFieldsAreRefusedNamingWhereTheyWere) {
  v1::JobSpec spec = Benchmark();
  spec.mutable_benchmark()
      ->GetReflection()
      ->MutableUnknownFields(spec.mutable_benchmark())
      ->AddLengthDelimited(99, std::string(1 << 20, 'u'));
  EXPECT_EQ(ResolveJobSpec(spec).status().message(),
            "benchmark: field number 99 is not a field of benchd.v1.BenchmarkSpec in this build "
            "of benchd (a client built from a newer bench.proto?); leave it unset or update the "
            "daemon");
  v1::JobSpec top = Collective({"cpu:0", "cpu:1"});
  top.GetReflection()->MutableUnknownFields(&top)->AddVarint(40, 1);
  EXPECT_EQ(ResolveJobSpec(top).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ResolveJobSpec(top).status().message().find("JobSpec: field number 40 "),
            std::string::npos);
  v1::CollectiveSpec* c = top.mutable_collective();
  top.GetReflection()->MutableUnknownFields(&top)->Clear();
  c->add_targets()->GetReflection()->MutableUnknownFields(c->mutable_targets(0))->AddFixed32(7, 1);
  EXPECT_NE(ResolveJobSpec(top).status().message().find("collective.targets[0]: field number 7 "),
            std::string::npos);
}

// The conveniences and the targets are folded together; the result must
// keep the limit too, so that a resolved spec resolves again.
TEST(SizeLimitsTest, TargetsFoldedTogetherKeepTheLimit) {
  v1::JobSpec spec;
  v1::CollectiveSpec* c = spec.mutable_collective();
  c->set_group("g1");
  for (int i = 0; i < kMaxCollectiveTargets; ++i) c->add_targets()->set_group("g2");
  ASSERT_TRUE(CheckSizeLimits(spec).ok());
  EXPECT_EQ(ResolveJobSpec(spec).status().message(),
            "collective.targets: expected at most 16 targets in one request (group, devices x "
            "backends and targets together), got 17");
  c->mutable_targets()->RemoveLast();
  auto resolved = ResolveJobSpec(spec);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->collective().targets_size(), kMaxCollectiveTargets);
  auto again = ResolveJobSpec(*resolved);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), resolved->SerializeAsString());
}

// Every string and list at its limit, every number at its longest encoding;
// of a oneof only the field named `chosen`.
void FillToLimits(Message* m, const std::string& chosen) {
  const Descriptor* d = m->GetDescriptor();
  const google::protobuf::Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->real_containing_oneof() != nullptr && f->name() != chosen) continue;
    const FieldLimit* list = FindFieldLimit(kListLimits, f->full_name());
    const int n = f->is_repeated() ? static_cast<int>(list ? list->max : 0) : 1;
    for (int k = 0; k < n; ++k) {
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_STRING: {
          const FieldLimit* limit = FindFieldLimit(kStringLimits, f->full_name());
          const std::string v(limit ? limit->max : 0, 'x');
          f->is_repeated() ? r->AddString(m, f, v) : r->SetString(m, f, v);
          break;
        }
        case FieldDescriptor::CPPTYPE_MESSAGE:
          FillToLimits(f->is_repeated() ? r->AddMessage(m, f) : r->MutableMessage(m, f), chosen);
          break;
        case FieldDescriptor::CPPTYPE_INT32:
          f->is_repeated() ? r->AddInt32(m, f, -1) : r->SetInt32(m, f, -1);
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          f->is_repeated() ? r->AddInt64(m, f, -1) : r->SetInt64(m, f, -1);
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          f->is_repeated() ? r->AddUInt64(m, f, ~uint64_t{0}) : r->SetUInt64(m, f, ~uint64_t{0});
          break;
        case FieldDescriptor::CPPTYPE_ENUM:
          f->is_repeated() ? r->AddEnumValue(m, f, -1) : r->SetEnumValue(m, f, -1);
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          f->is_repeated() ? r->AddDouble(m, f, 1.5) : r->SetDouble(m, f, 1.5);
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          f->is_repeated() ? r->AddBool(m, f, true) : r->SetBool(m, f, true);
          break;
        default:
          ADD_FAILURE() << f->full_name() << ": a type FillToLimits does not fill";
      }
    }
  }
}

// The largest request the limits let through is far below kMaxRequestBytes
// (the gRPC receive limit recommended for the server), so that limit never
// refuses a request these checks would take.
TEST(SizeLimitsTest, TheLargestRequestTheLimitsAllowIsFarBelowTheReceiveLimit) {
  size_t largest = 0;
  std::string which;
  for (const Descriptor* type : testing::RequestTypes(BenchServiceDescriptor())) {
    for (const char* chosen : {"benchmark", "profile", "memory", "collective"}) {
      auto m = New(type);
      FillToLimits(m.get(), chosen);
      EXPECT_TRUE(CheckSizeLimits(*m).ok()) << type->name() << " " << CheckSizeLimits(*m);
      if (m->ByteSizeLong() > largest) {
        largest = m->ByteSizeLong();
        which = absl::StrCat(type->name(), " (", chosen, ")");
      }
    }
  }
  EXPECT_LT(largest, static_cast<size_t>(kMaxRequestBytes) / 4) << which;
  EXPECT_GT(largest, 10000u) << which;  // the fill did fill
  RecordProperty("largest_request_bytes", static_cast<int>(largest));
  std::cout << "largest request within the limits: " << which << ", " << largest << " bytes\n";
}

// The field a path names ("collective.targets[0].backend"), from JobSpec.
const FieldDescriptor* FieldAt(const std::string& path) {
  const Descriptor* d = v1::JobSpec::descriptor();
  const FieldDescriptor* f = nullptr;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    part = part.substr(0, part.find('['));
    if (d == nullptr) return nullptr;
    f = d->FindFieldByName(std::string(part));
    if (f == nullptr) return nullptr;
    d = f->message_type();
  }
  return f;
}

// The table: one out-of-range value per number (integers, enums, floats) of
// a JobSpec, each refused by ResolveJobSpec naming the field's path. Every
// number field of a JobSpec is in it, or in `kAnyValue` (with why), so a
// number field added later needs a row here and a check in job_spec.cc.
TEST(RangeLimitsTest, EveryNumberOfAJobSpecOutOfItsRangeIsRefusedNamingIt) {
  struct Case {
    std::string field;  // the path the refusal starts with
    std::function<void(v1::JobSpec*)> set;
    v1::JobSpec (*base)();
  };
  auto bench = [] { return Benchmark(); };
  auto profile = [] { return Profile(); };
  auto memory = [] { return Memory(); };
  auto collective = [] { return Collective({"cpu:0", "cpu:1"}); };
  auto B = [](v1::JobSpec* s) { return s->mutable_benchmark(); };
  auto M = [](v1::JobSpec* s) { return s->mutable_memory(); };
  auto C = [](v1::JobSpec* s) { return s->mutable_collective(); };
  auto attention = [] {
    v1::JobSpec s;
    s.mutable_attention();
    return s;
  };
  auto A = [](v1::JobSpec* s) { return s->mutable_attention(); };
  auto precision = [] {
    v1::JobSpec s;
    s.mutable_precision();
    return s;
  };
  auto P = [](v1::JobSpec* s) { return s->mutable_precision(); };
  auto ddp = [] {
    v1::JobSpec s;
    s.mutable_ddp()->mutable_target()->add_devices("cpu:0");
    s.mutable_ddp()->mutable_target()->add_devices("cpu:1");
    s.mutable_ddp()->mutable_step()->mutable_model()->set_preset("tiny");
    return s;
  };
  auto D = [](v1::JobSpec* s) { return s->mutable_ddp(); };
  const int64_t big = kMaxContext * 2;  // over every model size's limit, divisible by heads
  const std::vector<Case> cases = {
      {"progress_timeout_seconds", [](v1::JobSpec* s) { s->set_progress_timeout_seconds(86401); },
       bench},
      {"progress_timeout_seconds", [](v1::JobSpec* s) { s->set_progress_timeout_seconds(-1); },
       bench},
      {"benchmark.model.vocab_size",
       [&](v1::JobSpec* s) { B(s)->mutable_model()->set_vocab_size(big); }, bench},
      {"benchmark.model.vocab_size",
       [&](v1::JobSpec* s) { B(s)->mutable_model()->set_vocab_size(-1); }, bench},
      {"benchmark.model.d_model", [&](v1::JobSpec* s) { B(s)->mutable_model()->set_d_model(big); },
       bench},
      {"benchmark.model.d_ff", [&](v1::JobSpec* s) { B(s)->mutable_model()->set_d_ff(big); },
       bench},
      {"benchmark.model.num_layers",
       [&](v1::JobSpec* s) { B(s)->mutable_model()->set_num_layers(big); }, bench},
      {"benchmark.model.num_heads",
       [&](v1::JobSpec* s) { B(s)->mutable_model()->set_num_heads(big); }, bench},
      {"benchmark.model.num_heads",
       [&](v1::JobSpec* s) { B(s)->mutable_model()->set_num_heads(-2); }, bench},
      {"benchmark.model.rope_theta",
       [&](v1::JobSpec* s) { B(s)->mutable_model()->set_rope_theta(-1); }, bench},
      {"benchmark.mode", [&](v1::JobSpec* s) { B(s)->set_mode(v1::BenchmarkMode(99)); }, bench},
      {"benchmark.precision", [&](v1::JobSpec* s) { B(s)->set_precision(v1::Precision(-1)); },
       bench},
      {"benchmark.batch_size", [&](v1::JobSpec* s) { B(s)->set_batch_size(kMaxBatch + 1); }, bench},
      {"benchmark.context_length",
       [&](v1::JobSpec* s) { B(s)->set_context_length(kMaxContext + 1); }, bench},
      {"benchmark.warmup_steps", [&](v1::JobSpec* s) { B(s)->set_warmup_steps(kMaxSteps + 1); },
       bench},
      {"benchmark.measure_steps", [&](v1::JobSpec* s) { B(s)->set_measure_steps(kMaxSteps + 1); },
       bench},
      {"benchmark.warmup_max_steps",
       [&](v1::JobSpec* s) {
         B(s)->set_warmup_auto(true);
         B(s)->set_warmup_max_steps(kMaxSteps + 1);
       },
       bench},
      {"benchmark.attention", [&](v1::JobSpec* s) { B(s)->set_attention(v1::AttentionImpl(99)); },
       bench},
      {"benchmark.optimizer_impl",
       [&](v1::JobSpec* s) { B(s)->set_optimizer_impl(v1::OptimizerImpl(99)); }, bench},
      {"profile.profile_steps",
       [](v1::JobSpec* s) { s->mutable_profile()->set_profile_steps(kMaxProfileSteps + 1); },
       profile},
      {"profile.activities[0]",
       [](v1::JobSpec* s) { s->mutable_profile()->add_activities(v1::ProfilerActivity(9)); },
       profile},
      {"profile.step.batch_size",
       [](v1::JobSpec* s) { s->mutable_profile()->mutable_step()->set_batch_size(0); }, profile},
      {"memory.record_steps", [&](v1::JobSpec* s) { M(s)->set_record_steps(101); }, memory},
      {"memory.max_entries",
       [&](v1::JobSpec* s) { M(s)->set_max_entries(kMaxMemoryMaxEntries + 1); }, memory},
      {"memory.max_entries",
       [&](v1::JobSpec* s) { M(s)->set_max_entries(kMinMemoryMaxEntries - 1); }, memory},
      {"memory.stacks", [&](v1::JobSpec* s) { M(s)->set_stacks(v1::MemoryStacks(99)); }, memory},
      {"memory.top_allocations",
       [&](v1::JobSpec* s) { M(s)->set_top_allocations(kMaxMemoryTopAllocations + 1); }, memory},
      {"memory.context_lengths[0]", [&](v1::JobSpec* s) { M(s)->add_context_lengths(0); }, memory},
      {"memory.modes[0]", [&](v1::JobSpec* s) { M(s)->add_modes(v1::BenchmarkMode(99)); }, memory},
      {"memory.precisions[0]", [&](v1::JobSpec* s) { M(s)->add_precisions(v1::Precision(99)); },
       memory},
      {"memory.step.context_length",
       [&](v1::JobSpec* s) { M(s)->mutable_step()->set_context_length(kMaxContext + 1); }, memory},
      {"collective.backend", [&](v1::JobSpec* s) { C(s)->set_backend(v1::CollectiveBackend(99)); },
       collective},
      {"collective.backends[0]",
       [&](v1::JobSpec* s) {
         C(s)->clear_backend();
         C(s)->add_backends(v1::CollectiveBackend(99));
       },
       collective},
      {"collective.targets[0].backend",
       [&](v1::JobSpec* s) {
         C(s)->clear_devices();
         C(s)->clear_backend();
         v1::CollectiveTarget* t = C(s)->add_targets();
         t->add_devices("cpu:0");
         t->add_devices("cpu:1");
         t->set_backend(v1::CollectiveBackend(99));
       },
       collective},
      {"collective.world_sizes[0]", [&](v1::JobSpec* s) { C(s)->add_world_sizes(3); }, collective},
      {"collective.world_sizes[0]", [&](v1::JobSpec* s) { C(s)->add_world_sizes(1); }, collective},
      {"collective.op", [&](v1::JobSpec* s) { C(s)->set_op(v1::CollectiveOp(99)); }, collective},
      {"collective.dtype", [&](v1::JobSpec* s) { C(s)->set_dtype(v1::CollectiveDtype(99)); },
       collective},
      {"collective.sizes_bytes[0]",
       [&](v1::JobSpec* s) { C(s)->add_sizes_bytes(kMaxCollectiveBytes + 1); }, collective},
      {"collective.min_bytes", [&](v1::JobSpec* s) { C(s)->set_min_bytes(0); }, collective},
      {"collective.max_bytes",
       [&](v1::JobSpec* s) { C(s)->set_max_bytes(kMaxCollectiveBytes + 1); }, collective},
      {"collective.factor", [&](v1::JobSpec* s) { C(s)->set_factor(kMaxCollectiveFactor + 1); },
       collective},
      {"collective.warmup_iters",
       [&](v1::JobSpec* s) { C(s)->set_warmup_iters(kMaxCollectiveWarmupIters + 1); }, collective},
      {"collective.iters", [&](v1::JobSpec* s) { C(s)->set_iters(kMaxCollectiveIters + 1); },
       collective},
      {"collective.timeout_seconds",
       [&](v1::JobSpec* s) { C(s)->set_timeout_seconds(kMaxTimeoutSeconds + 1); }, collective},
      {"sweep.cell_timeout_seconds",
       [&](v1::JobSpec* s) {
         v1::SweepAxis* a = s->mutable_sweep()->add_axes();
         a->set_field("precision");
         a->add_values("fp32");
         s->mutable_sweep()->set_cell_timeout_seconds(kMaxTimeoutSeconds + 1);
       },
       bench},
      {"attention.batch_size", [&](v1::JobSpec* s) { A(s)->set_batch_size(0); }, attention},
      {"attention.batch_size",
       [&](v1::JobSpec* s) { A(s)->set_batch_size(kMaxAttentionBatch + 1); }, attention},
      {"attention.num_heads", [&](v1::JobSpec* s) { A(s)->set_num_heads(0); }, attention},
      {"attention.num_heads", [&](v1::JobSpec* s) { A(s)->set_num_heads(kMaxAttentionHeads + 1); },
       attention},
      {"attention.head_dim", [&](v1::JobSpec* s) { A(s)->set_head_dim(0); }, attention},
      {"attention.head_dim", [&](v1::JobSpec* s) { A(s)->set_head_dim(kMaxAttentionHeadDim + 1); },
       attention},
      {"attention.seq_len", [&](v1::JobSpec* s) { A(s)->set_seq_len(-1); }, attention},
      {"attention.seq_len", [&](v1::JobSpec* s) { A(s)->set_seq_len(kMaxContext + 1); }, attention},
      {"attention.precision", [&](v1::JobSpec* s) { A(s)->set_precision(v1::Precision(9)); },
       attention},
      {"attention.implementation",
       [&](v1::JobSpec* s) { A(s)->set_implementation(v1::AttentionImpl(99)); }, attention},
      {"attention.warmup_passes", [&](v1::JobSpec* s) { A(s)->set_warmup_passes(-1); }, attention},
      {"attention.warmup_passes",
       [&](v1::JobSpec* s) { A(s)->set_warmup_passes(kMaxAttentionWarmupPasses + 1); }, attention},
      {"attention.passes", [&](v1::JobSpec* s) { A(s)->set_passes(0); }, attention},
      {"attention.passes", [&](v1::JobSpec* s) { A(s)->set_passes(kMaxSteps + 1); }, attention},
      {"attention.memory_cap_bytes",
       [&](v1::JobSpec* s) { A(s)->set_memory_cap_bytes(kMinAttentionMemoryCapBytes - 1); },
       attention},
      {"precision.experiments[0]",
       [&](v1::JobSpec* s) { P(s)->add_experiments(v1::PrecisionExperiment(9)); }, precision},
      {"precision.autocast_dtypes[0]",
       [&](v1::JobSpec* s) { P(s)->add_autocast_dtypes(v1::Precision(9)); }, precision},
      {"precision.count", [&](v1::JobSpec* s) { P(s)->set_count(kMaxPrecisionCount + 1); },
       precision},
      {"precision.addend", [&](v1::JobSpec* s) { P(s)->set_addend(1e9); }, precision},
      {"ddp.global_batch_size", [&](v1::JobSpec* s) { D(s)->set_global_batch_size(0); }, ddp},
      {"ddp.variants[0]", [&](v1::JobSpec* s) { D(s)->add_variants(v1::DdpVariant(9)); }, ddp},
      {"ddp.bucket_mb[0]", [&](v1::JobSpec* s) { D(s)->add_bucket_mb(0); }, ddp},
      {"ddp.optimizers[0]", [&](v1::JobSpec* s) { D(s)->add_optimizers(v1::DdpOptimizer(9)); },
       ddp},
      {"ddp.gradient_compressions[0]",
       [&](v1::JobSpec* s) { D(s)->add_gradient_compressions(v1::DdpGradientCompression(9)); },
       ddp},
      {"ddp.timeout_seconds",
       [&](v1::JobSpec* s) { D(s)->set_timeout_seconds(kMaxTimeoutSeconds + 1); }, ddp},
  };
  std::set<const FieldDescriptor*> covered;
  for (const Case& c : cases) {
    v1::JobSpec spec = c.base();
    ASSERT_TRUE(ResolveJobSpec(spec).ok()) << c.field << ": the base spec";
    c.set(&spec);
    auto out = ResolveJobSpec(spec);
    ASSERT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(out.status().message().substr(0, c.field.size() + 2), c.field + ": ") << out.status();
    const FieldDescriptor* f = FieldAt(c.field);
    ASSERT_NE(f, nullptr) << c.field;
    covered.insert(f);
  }
  // A number any value of which is accepted, and why.
  const std::map<std::string, std::string> kAnyValue = {
      {"benchd.v1.BenchmarkSpec.seed", "every uint64 is a seed"},
      {"benchd.v1.AttentionSpec.seed", "every uint64 is a seed"},
      {"benchd.v1.PrecisionSpec.seed", "every uint64 is a seed"},
  };
  std::vector<const Descriptor*> todo = {v1::JobSpec::descriptor()};
  std::set<const Descriptor*> seen;
  while (!todo.empty()) {
    const Descriptor* d = todo.back();
    todo.pop_back();
    if (!seen.insert(d).second) continue;
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_MESSAGE:
          todo.push_back(f->message_type());
          break;
        case FieldDescriptor::CPPTYPE_STRING:
        case FieldDescriptor::CPPTYPE_BOOL:
          break;  // strings: SizeLimitsTest; a bool has no range
        default:
          EXPECT_TRUE(covered.count(f) == 1 || kAnyValue.count(f->full_name()) == 1)
              << f->full_name() << ": a number with no out-of-range case here";
      }
    }
  }
}

TEST(ResolveAttentionTest, TheLeaderboardPresetFillsWhatIsUnsetAndFlushesL2) {
  v1::JobSpec in;
  in.mutable_attention()->set_preset("leaderboard");
  in.mutable_attention()->set_implementation(v1::ATTENTION_IMPL_FUSED);
  auto resolved = ResolveJobSpec(in);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  const v1::AttentionSpec* a = &resolved->attention();
  EXPECT_EQ(a->precision(), v1::PRECISION_BF16);
  EXPECT_TRUE(a->causal());
  EXPECT_TRUE(a->flush_l2());
  EXPECT_EQ(a->batch_size(), 1);
  EXPECT_EQ(a->num_heads(), 16);
  EXPECT_EQ(a->seq_len(), 16384);
  EXPECT_EQ(a->head_dim(), 64);
  EXPECT_EQ(a->implementation(), v1::ATTENTION_IMPL_FUSED);
  // A field given wins.
  in.mutable_attention()->set_head_dim(128);
  in.mutable_attention()->set_precision(v1::PRECISION_FP16);
  resolved = ResolveJobSpec(in);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->attention().head_dim(), 128);
  EXPECT_EQ(resolved->attention().precision(), v1::PRECISION_FP16);
  in.mutable_attention()->set_preset("leaderbord");
  const absl::Status s = ResolveJobSpec(in).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring,
                      "attention.preset: unknown preset 'leaderbord'; expected leaderboard or none",
                      std::string(s.message()));
}

// The one list of request kinds: every JobKind but UNSPECIFIED, named as
// benchctl spells it, parsed back, with a progress deadline, and a JobSpec
// oneof field for each (a kind added to the proto without one fails here).
TEST(JobKindsTest, EveryKindOfTheEnumNamedParsedAndAFieldOfTheSpec) {
  const std::vector<v1::JobKind>& kinds = JobKinds();
  ASSERT_EQ(kinds.size(), static_cast<size_t>(v1::JobKind_descriptor()->value_count() - 1));
  EXPECT_EQ(JobKindName(kinds.front()), "benchmark");
  EXPECT_EQ(JobKindName(kinds.back()), "ddp");
  EXPECT_EQ(JobKindName(v1::JOB_KIND_UNSPECIFIED), "");
  EXPECT_EQ(JobKindChoices(),
            "benchmark, profile, memory, collective, attention, precision or ddp");
  EXPECT_EQ(ParseJobKind("train").status().message(),
            "unknown kind 'train'; expected benchmark, profile, memory, collective, attention, "
            "precision or ddp");
  EXPECT_FALSE(ParseJobKind("unspecified").ok());
  const google::protobuf::OneofDescriptor* oneof =
      v1::JobSpec::descriptor()->FindOneofByName("kind");
  ASSERT_NE(oneof, nullptr);
  std::set<std::string> fields;
  for (int i = 0; i < oneof->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = oneof->field(i);
    v1::JobSpec spec;
    spec.GetReflection()->MutableMessage(&spec, f);
    EXPECT_EQ(JobKindName(spec), f->name()) << f->name();
    fields.insert(f->name());
  }
  for (v1::JobKind k : kinds) {
    const std::string name = JobKindName(k);
    EXPECT_EQ(*ParseJobKind(name), k);
    EXPECT_EQ(*ParseJobKind(absl::AsciiStrToUpper(name)), k);
    EXPECT_GT(DefaultProgressTimeoutSeconds(k), 0) << name;
    EXPECT_TRUE(fields.count(name)) << "JobKind " << name << " has no JobSpec field";
  }
}

}  // namespace
}  // namespace benchd
