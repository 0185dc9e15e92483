#include "server/core/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/job_spec.h"
#include "common/model_config.h"

namespace benchd::server {
namespace {

// The lines of the exposition whose metric name is `name` (no comments).
std::vector<std::string> Lines(const Metrics& m, const std::string& name) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(m.Serialize(), '\n')) {
    if (line.substr(0, name.size() + 1) == name + "{") out.emplace_back(line);
  }
  return out;
}

std::unique_ptr<Metrics> NewMetrics() {
  auto m = Metrics::Create("", {"cuda:0"});
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

// A resolved spec as the job manager has it: the preset's dimensions filled.
v1::BenchmarkSpec Spec(const std::string& preset, int64_t batch, int64_t context) {
  v1::BenchmarkSpec s;
  v1::ModelConfig model;
  model.set_preset(preset);
  *s.mutable_model() = *ResolveModelConfig(model);
  s.set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  s.set_precision(v1::PRECISION_BF16);
  s.set_batch_size(batch);
  s.set_context_length(context);
  s.set_warmup_steps(5);
  s.set_measure_steps(10);
  return s;
}

v1::BenchmarkResult Result(const v1::BenchmarkSpec& spec, double median) {
  v1::BenchmarkResult r;
  *r.mutable_spec() = spec;
  r.set_device("cuda:0");
  r.mutable_step()->set_median(median);
  return r;
}

TEST(MetricsTest, EachBatchSizeAndContextLengthIsASeriesOfItsOwn) {
  auto m = NewMetrics();
  m->SetLastBenchmark(Result(Spec("small", 4, 128), 0.1));
  m->SetLastBenchmark(Result(Spec("small", 16, 128), 0.4));
  m->SetLastBenchmark(Result(Spec("small", 4, 512), 0.5));
  const auto lines = Lines(*m, "benchd_benchmark_last_step_seconds");
  ASSERT_EQ(lines.size(), 3u) << m->Serialize();
  std::set<std::string> workloads;
  for (const auto& line : lines) {
    std::smatch w;
    ASSERT_TRUE(std::regex_search(line, w, std::regex(R"re(workload="([0-9a-f]{16})")re"))) << line;
    workloads.insert(w[1]);
  }
  EXPECT_EQ(workloads.size(), 3u);
  const std::string serialized = m->Serialize();
  EXPECT_NE(serialized.find("batch_size=\"16\",context_length=\"128\""), std::string::npos)
      << serialized;
  EXPECT_NE(serialized.find("batch_size=\"4\",context_length=\"512\""), std::string::npos);
  // The step histogram too: one per workload.
  m->ObserveStep(Spec("small", 4, 128), 0.1);
  m->ObserveStep(Spec("small", 16, 128), 0.4);
  EXPECT_EQ(Lines(*m, "benchd_benchmark_step_duration_seconds_count").size(), 2u);
}

TEST(MetricsTest, CustomModelsAreToldApartByTheirWorkload) {
  v1::BenchmarkSpec a = Spec("small", 4, 128);
  a.mutable_model()->set_preset("");
  v1::BenchmarkSpec b = a;
  b.mutable_model()->set_d_model(1024);
  ASSERT_EQ(ModelLabel(a.model()), "custom");
  ASSERT_EQ(ModelLabel(b.model()), "custom");
  auto m = NewMetrics();
  m->SetLastBenchmark(Result(a, 0.1));
  m->SetLastBenchmark(Result(b, 0.3));
  EXPECT_EQ(Lines(*m, "benchd_benchmark_last_step_seconds").size(), 2u) << m->Serialize();
}

TEST(MetricsTest, WorkloadIsWhatSetsTheStepTime) {
  const v1::BenchmarkSpec base = Spec("small", 4, 128);
  const std::string w = WorkloadLabel(base);
  EXPECT_TRUE(std::regex_match(w, std::regex("[0-9a-f]{16}"))) << w;
  // Not how it is measured, nor the preset's name for the same dimensions.
  v1::BenchmarkSpec same = base;
  same.set_warmup_steps(1);
  same.set_measure_steps(100);
  same.set_seed(7);
  same.set_warmup_auto(true);
  same.set_warmup_max_steps(20);
  same.set_export_parity(true);
  same.mutable_model()->set_preset("");
  EXPECT_EQ(WorkloadLabel(same), w);
  // Options the worker runs through autograd anyway: asked or not, one workload.
  v1::BenchmarkSpec sdpa = base;
  sdpa.set_attention(v1::ATTENTION_IMPL_SDPA);
  v1::BenchmarkSpec sdpa_echo = sdpa;
  sdpa_echo.set_autograd(true);
  EXPECT_EQ(WorkloadLabel(sdpa), WorkloadLabel(sdpa_echo));
  EXPECT_NE(WorkloadLabel(sdpa), w);
  v1::BenchmarkSpec faithful = base;
  faithful.set_attention(v1::ATTENTION_IMPL_FAITHFUL);
  EXPECT_EQ(WorkloadLabel(faithful), w);
  v1::BenchmarkSpec faithful_adamw = base;
  faithful_adamw.set_optimizer_impl(v1::OPTIMIZER_IMPL_FAITHFUL);
  EXPECT_EQ(WorkloadLabel(faithful_adamw), w);
  // Everything else that changes the work does.
  std::vector<v1::BenchmarkSpec> others(8, base);
  others[0].set_batch_size(8);
  others[1].set_context_length(256);
  others[2].set_mode(v1::BENCHMARK_MODE_FORWARD);
  others[3].set_precision(v1::PRECISION_FP32);
  others[4].mutable_model()->set_num_layers(13);
  others[5].set_cuda_graph(true);
  others[6].set_fused_ops(true);
  others[7].set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
  std::set<std::string> all = {w};
  for (const auto& o : others) all.insert(WorkloadLabel(o));
  EXPECT_EQ(all.size(), others.size() + 1);
}

TEST(MetricsTest, EveryKindStartsWithZeroFailedJobs) {
  auto m = NewMetrics();
  const auto lines = Lines(*m, "benchd_jobs_finished_total");
  for (const auto& kind : JobKindNames()) {
    const std::string failed =
        "benchd_jobs_finished_total{kind=\"" + kind + "\",outcome=\"failed\"} 0";
    EXPECT_NE(std::find(lines.begin(), lines.end(), failed), lines.end()) << failed;
  }
  m->JobFinished("benchmark", "failed", 1.0);
  EXPECT_NE(
      m->Serialize().find("benchd_jobs_finished_total{kind=\"benchmark\",outcome=\"failed\"} 1"),
      std::string::npos);
}

TEST(MetricsTest, WorkerInfoCarriesDcgmExportersGpuLabels) {
  auto m = NewMetrics();
  internal::WorkerInfo info;
  info.mutable_device()->set_description("NVIDIA H100 80GB HBM3");
  info.mutable_versions()->set_torch("2.11.0");
  info.set_uuid("GPU-1c2b08c1-f602-d290-4519-863bc0c96079");
  info.set_pci_bus_id("00000000:30:00.0");
  m->SetWorkerInfo("cuda:0", info);
  const auto lines = Lines(*m, "benchd_worker_info");
  ASSERT_EQ(lines.size(), 1u) << m->Serialize();
  EXPECT_NE(lines[0].find("UUID=\"GPU-1c2b08c1-f602-d290-4519-863bc0c96079\""), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("pci_bus_id=\"00000000:30:00.0\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("device=\"cuda:0\""), std::string::npos) << lines[0];
  // A restarted worker on another GPU (the device was swapped): one series, the new one.
  info.set_uuid("GPU-00000000-0000-0000-0000-000000000001");
  m->SetWorkerInfo("cuda:0", info);
  const auto after = Lines(*m, "benchd_worker_info");
  ASSERT_EQ(after.size(), 1u) << m->Serialize();
  EXPECT_NE(after[0].find("GPU-00000000-0000-0000-0000-000000000001"), std::string::npos);
}

}  // namespace
}  // namespace benchd::server
