// export_parity on the CPU: the bundle holds the seed's initial weights (even
// when a trained model of the same key was resident), the batch the steps ran
// on and the logits of the first step's forward; the refusals.
#include "worker/parity_export.h"

#include <gtest/gtest.h>

#include <ftw.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/model_config.h"
#include "worker/benchmark.h"

namespace benchd::worker {
namespace {

// rm -rf, without std::filesystem (see parity_export.cc).
void RemoveTree(const std::string& dir) {
  nftw(
      dir.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return remove(p); },
      16, FTW_DEPTH | FTW_PHYS);
}

v1::BenchmarkSpec TinySpec(v1::Precision precision, bool export_parity) {
  v1::JobSpec job;
  v1::BenchmarkSpec* b = job.mutable_benchmark();
  b->mutable_model()->set_preset("tiny");
  b->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  b->set_precision(precision);
  b->set_batch_size(2);
  b->set_context_length(16);
  b->set_warmup_steps(0);
  b->set_measure_steps(3);
  b->set_seed(11);
  b->set_export_parity(export_parity);
  auto resolved = ResolveJobSpec(job);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved->benchmark();
}

c10::impl::GenericDict Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return torch::pickle_load(bytes).toGenericDict();
}

class ParityExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/benchd-parity-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { RemoveTree(dir_); }

  std::string dir_;
  ModelCache cache_{*ParseWorkerDevice("cpu:0")};
};

TEST_F(ParityExportTest, BundleHoldsInitialWeightsBatchAndFirstLogits) {
  // A trained model of the same key is resident first: the export must not use it.
  ASSERT_TRUE(RunBenchmark(TinySpec(v1::PRECISION_FP32, false), cache_).ok());

  const auto spec = TinySpec(v1::PRECISION_FP32, true);
  BenchmarkHooks hooks;
  hooks.parity_bundle_path = dir_ + "/7/parity.pt";
  auto r = RunBenchmark(spec, cache_, hooks);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->parity_bundle(), hooks.parity_bundle_path);
  EXPECT_FALSE(r->model_was_resident());

  const auto bundle = Load(r->parity_bundle());
  EXPECT_EQ(bundle.at("format").toStringRef(), kParityBundleFormat);

  // The seed's weights, as a fresh build makes them.
  torch::manual_seed(spec.seed());
  TransformerLM fresh(spec.model(), torch::TensorOptions().dtype(torch::kFloat32));
  const auto params = bundle.at("params").toGenericDict();
  EXPECT_EQ(static_cast<int64_t>(params.size()), static_cast<int64_t>(fresh->parameters().size()));
  int64_t numel = 0;
  for (const auto& item : fresh->named_parameters()) {
    ASSERT_TRUE(params.contains(item.key())) << item.key();
    const torch::Tensor p = params.at(item.key()).toTensor();
    EXPECT_TRUE(torch::equal(p, item.value())) << item.key();
    numel += p.numel();
  }
  EXPECT_EQ(numel, ParameterCount(spec.model()));
  EXPECT_TRUE(params.contains("layers.1.attn.q_proj.weight"));
  EXPECT_TRUE(params.contains("layers.0.ffn.w3.weight"));
  EXPECT_TRUE(params.contains("lm_head.weight"));

  // The batch and the first forward's logits: the loss of those logits is step 0's.
  const torch::Tensor inputs = bundle.at("inputs").toTensor();
  const torch::Tensor targets = bundle.at("targets").toTensor();
  const torch::Tensor logits = bundle.at("logits").toTensor();
  EXPECT_EQ(inputs.sizes(), (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(targets.sizes(), (std::vector<int64_t>{2, 16}));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 16, 1000}));
  EXPECT_EQ(logits.scalar_type(), torch::kFloat32);
  EXPECT_NEAR(CrossEntropy(logits, targets).item<double>(), r->steps(0).loss(), 1e-6);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(fresh->forward(inputs), logits, 1e-5, 1e-6));
  // Steps after the first trained the model, so later losses differ.
  EXPECT_NE(r->steps(1).loss(), r->steps(0).loss());

  const auto config = bundle.at("config").toGenericDict();
  EXPECT_EQ(config.at("d_model").toInt(), 64);
  EXPECT_EQ(config.at("num_layers").toInt(), 2);
  EXPECT_EQ(config.at("vocab_size").toInt(), 1000);
  EXPECT_EQ(config.at("rope_theta").toDouble(), 10000.0);
  EXPECT_EQ(config.at("mode").toStringRef(), "train_step");
  EXPECT_EQ(config.at("precision").toStringRef(), "fp32");
  EXPECT_EQ(config.at("seed").toInt(), 11);
}

TEST_F(ParityExportTest, Bf16LogitsAreTheAutocastForwardWidened) {
  const auto spec = TinySpec(v1::PRECISION_BF16, true);
  BenchmarkHooks hooks;
  hooks.parity_bundle_path = dir_ + "/8/parity.pt";
  auto r = RunBenchmark(spec, cache_, hooks);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto bundle = Load(r->parity_bundle());
  const torch::Tensor logits = bundle.at("logits").toTensor();
  EXPECT_EQ(logits.scalar_type(), torch::kFloat32);
  // Values that came from bf16: widening back and forth changes nothing.
  EXPECT_TRUE(torch::equal(logits, logits.to(torch::kBFloat16).to(torch::kFloat32)));
  EXPECT_EQ(bundle.at("config").toGenericDict().at("precision").toStringRef(), "bf16");
}

TEST_F(ParityExportTest, RefusedWithoutAPlaceToWrite) {
  auto r = RunBenchmark(TinySpec(v1::PRECISION_FP32, true), cache_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);

  auto no_dir = ParityBundlePath("", "3");
  EXPECT_EQ(no_dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_dir.status().message().find("--artifacts-dir"), std::string::npos);
  EXPECT_EQ(ParityBundlePath("/a", "../x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParityBundlePath("/a", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParityBundlePath("/a", "12"), "/a/12/parity.pt");
}

TEST(ParityLimitTest, RefusedAboveTwoBillionParameters) {
  v1::JobSpec job;
  job.mutable_benchmark()->mutable_model()->set_preset("2.7B");
  job.mutable_benchmark()->set_export_parity(true);
  auto r = ResolveJobSpec(job);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("benchmark.export_parity"), std::string::npos);
  // xl (1.998e9 parameters) is just under the limit.
  job.mutable_benchmark()->mutable_model()->set_preset("xl");
  EXPECT_TRUE(ResolveJobSpec(job).ok());
}

}  // namespace
}  // namespace benchd::worker
