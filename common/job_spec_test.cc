#include "common/job_spec.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/number_fields_test_util.h"
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
            "spec: no request kind set; expected one of benchmark, profile, memory, collective");
  EXPECT_EQ(JobKindOf(Benchmark()), v1::JOB_KIND_BENCHMARK);
  EXPECT_EQ(JobKindName(Benchmark()), "benchmark");
  in.mutable_collective();
  EXPECT_EQ(JobKindName(in), "collective");
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

TEST(CollectiveSpecTest, BadInputNamed) {
  ExpectInvalid(Collective({"cpu:0", "cpu:1"}, v1::COLLECTIVE_BACKEND_NCCL),
                "nccl needs CUDA devices");
  ExpectInvalid(Collective({"cpu:0", "cpu:0"}), "cpu:0 appears twice");
  ExpectInvalid(Collective({"cpu:0"}), "world size 1");
  ExpectInvalid(Collective({"cpu:0", "cuda:1"}), "mixes cpu and cuda");
  ExpectInvalid(Collective({"gpu0", "cpu:1"}), "'gpu0' is not a device name");
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
}

}  // namespace
}  // namespace benchd

namespace benchd {
namespace {

// Found reading the code and confirmed under UBSan (fuzz/corpus/job_spec/
// repro-memory-sweep-runs-overflow): the run count wrapped negative and the
// 64-run limit let a sweep of billions of runs through.
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
  EXPECT_NE(out.status().message().find("the sweep has 2197000000 runs"), std::string::npos)
      << out.status();
}

}  // namespace
}  // namespace benchd
