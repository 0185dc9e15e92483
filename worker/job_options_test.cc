// The options on a CPU: SDPA against the course's attention, the backend and
// TF32 guards, the device checks, and whole benchmark runs with options.
#include "worker/job_options.h"

#include <gtest/gtest.h>

#include <ATen/Context.h>
#include <ATen/SDPBackend.h>

#include <string>

#include "common/job_spec.h"
#include "common/model_config.h"
#include "common/warmup.h"
#include "worker/benchmark.h"
#include "worker/model_cache.h"

namespace benchd::worker {
namespace {

using ::testing::IsSubstring;

v1::ModelConfig Tiny() {
  v1::ModelConfig in;
  in.set_preset("tiny");
  return *ResolveModelConfig(in);
}

v1::BenchmarkSpec Resolved(const v1::BenchmarkSpec& b) {
  v1::JobSpec job;
  *job.mutable_benchmark() = b;
  auto resolved = ResolveJobSpec(job);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved.ok() ? resolved->benchmark() : v1::BenchmarkSpec();
}

v1::BenchmarkSpec TinySpec(v1::BenchmarkMode mode) {
  v1::BenchmarkSpec b;
  b.mutable_model()->set_preset("tiny");
  b.set_mode(mode);
  b.set_batch_size(2);
  b.set_context_length(16);
  b.set_measure_steps(3);
  b.set_seed(5);
  return b;
}

const WorkerDevice& CpuWorker() {
  static const WorkerDevice d = *ParseWorkerDevice("cpu:0");
  return d;
}

int64_t SdpChoice(const torch::Tensor& q) {
  return at::_fused_sdp_choice(q, q, q, {}, 0.0, /*is_causal=*/true);
}

double MaxAbsDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

TEST(SdpaTest, EverySdpaChoiceGivesTheFaithfulLogitsAndGradients) {
  torch::manual_seed(3);
  TransformerLM lm(Tiny(), torch::TensorOptions().dtype(torch::kFloat32));
  const auto ids = torch::randint(0, 1000, {2, 16}, torch::kInt64);
  const auto targets = torch::randint(0, 1000, {2, 16}, torch::kInt64);
  lm->zero_grad(true);
  const torch::Tensor faithful = lm->forward(ids);
  CrossEntropy(faithful, targets).backward();
  const torch::Tensor faithful_grad = lm->layers[0]->attn->q_proj->weight.grad().clone();
  ASSERT_GT(faithful.abs().max().item<double>(), 0.1);

  for (auto a : {v1::ATTENTION_IMPL_SDPA, v1::ATTENTION_IMPL_SDPA_MATH,
                 v1::ATTENTION_IMPL_SDPA_FLASH, v1::ATTENTION_IMPL_TILED}) {
    SCOPED_TRACE(static_cast<int>(a));
    SdpBackendGuard guard(a);
    lm->SetAttention(a);
    lm->zero_grad(true);
    const torch::Tensor logits = lm->forward(ids);
    CrossEntropy(logits, targets).backward();
    EXPECT_LT(MaxAbsDiff(logits, faithful), 1e-5);
    const torch::Tensor grad = lm->layers[0]->attn->q_proj->weight.grad();
    const double scale = 1 + faithful_grad.abs().max().item<double>();
    EXPECT_LT(MaxAbsDiff(grad, faithful_grad), 1e-5 * scale);
  }
  lm->SetAttention(v1::ATTENTION_IMPL_FAITHFUL);
  EXPECT_TRUE(torch::equal(lm->forward(ids), faithful));
}

TEST(SdpaTest, TheSdpaPathIsReallyTaken) {
  // Equal logits alone would not tell the paths apart; the autograd history
  // does: with flash forced it holds the CPU flash kernel's backward node.
  torch::manual_seed(4);
  TransformerLM lm(Tiny(), torch::TensorOptions().dtype(torch::kFloat32));
  const auto ids = torch::randint(0, 1000, {1, 8}, torch::kInt64);
  const torch::Tensor x = lm->token_embeddings->forward(ids);
  auto& attn = lm->layers[0]->attn;
  attn->set_attention(v1::ATTENTION_IMPL_SDPA_FLASH);
  {
    SdpBackendGuard guard(v1::ATTENTION_IMPL_SDPA_FLASH);
    torch::Tensor y = attn->forward(x);
    std::vector<std::string> names;
    std::vector<std::shared_ptr<torch::autograd::Node>> todo = {y.grad_fn()};
    while (!todo.empty()) {
      auto n = todo.back();
      todo.pop_back();
      if (!n) continue;
      names.push_back(n->name());
      for (const auto& e : n->next_edges()) todo.push_back(e.function);
    }
    bool flash = false;
    for (const auto& name : names) flash |= name.find("FlashAttention") != std::string::npos;
    EXPECT_TRUE(flash) << "no flash-attention node in the graph";
  }
}

TEST(SdpBackendGuardTest, ForcesOneBackendAndRestoresTheSwitches) {
  auto& ctx = at::globalContext();
  const auto q = torch::randn({1, 2, 8, 16});
  ASSERT_TRUE(ctx.userEnabledMathSDP() && ctx.userEnabledFlashSDP());
  {
    SdpBackendGuard guard(v1::ATTENTION_IMPL_SDPA_MATH);
    EXPECT_TRUE(ctx.userEnabledMathSDP());
    EXPECT_FALSE(ctx.userEnabledFlashSDP());
    EXPECT_FALSE(ctx.userEnabledMemEfficientSDP());
    EXPECT_FALSE(ctx.userEnabledCuDNNSDP());
    EXPECT_EQ(SdpChoice(q), static_cast<int64_t>(at::SDPBackend::math));
  }
  {
    SdpBackendGuard guard(v1::ATTENTION_IMPL_SDPA_FLASH);
    EXPECT_FALSE(ctx.userEnabledMathSDP());
    EXPECT_EQ(SdpChoice(q), static_cast<int64_t>(at::SDPBackend::flash_attention));
  }
  {
    SdpBackendGuard guard(v1::ATTENTION_IMPL_SDPA);  // PyTorch picks: nothing changes
    EXPECT_TRUE(ctx.userEnabledMathSDP() && ctx.userEnabledFlashSDP());
  }
  EXPECT_TRUE(ctx.userEnabledMathSDP());
  EXPECT_TRUE(ctx.userEnabledFlashSDP());
  EXPECT_TRUE(ctx.userEnabledMemEfficientSDP());
  EXPECT_TRUE(ctx.userEnabledCuDNNSDP());
}

TEST(SdpBackendGuardTest, AnUnavailableBackendFailsNamingItAndTheDevice) {
  SdpBackendGuard guard(v1::ATTENTION_IMPL_SDPA_EFFICIENT);
  const auto q = torch::randn({1, 2, 8, 16});
  try {
    SdpaCausalAttention(q, q, q, v1::ATTENTION_IMPL_SDPA_EFFICIENT);
    FAIL() << "efficient attention ran on a CPU";
  } catch (const AttentionBackendUnavailable& e) {
    const std::string what = e.what();
    EXPECT_PRED_FORMAT2(IsSubstring, "attention efficient (forced SDPA backend) cannot run on cpu",
                        what);
    EXPECT_PRED_FORMAT2(IsSubstring, "[1, 2, 8, 16] Float", what);
  }
}

TEST(Tf32GuardTest, TurnsTf32OnForTheJobAndRestores) {
  auto& ctx = at::globalContext();
  ASSERT_FALSE(ctx.allowTF32CuBLAS());  // PyTorch's default: full fp32 matmuls
  const bool cudnn = ctx.allowTF32CuDNN();
  {
    Tf32Guard off(false);
    EXPECT_FALSE(ctx.allowTF32CuBLAS());
  }
  {
    Tf32Guard on(true);
    EXPECT_TRUE(ctx.allowTF32CuBLAS());
    EXPECT_TRUE(ctx.allowTF32CuDNN());
    EXPECT_EQ(ctx.float32MatmulPrecision(), at::Float32MatmulPrecision::HIGH);
  }
  EXPECT_FALSE(ctx.allowTF32CuBLAS());
  EXPECT_EQ(ctx.float32MatmulPrecision(), at::Float32MatmulPrecision::HIGHEST);
  EXPECT_EQ(ctx.allowTF32CuDNN(), cudnn);
}

TEST(CheckOptionsForDeviceTest, ACpuRefusesCudaOnlyOptionsNamingTheField) {
  auto spec = Resolved(TinySpec(v1::BENCHMARK_MODE_FORWARD));
  EXPECT_TRUE(CheckOptionsForDevice(spec, CpuWorker()).ok());
  for (auto a :
       {v1::ATTENTION_IMPL_SDPA, v1::ATTENTION_IMPL_SDPA_FLASH, v1::ATTENTION_IMPL_SDPA_MATH}) {
    spec.set_attention(a);
    EXPECT_TRUE(CheckOptionsForDevice(spec, CpuWorker()).ok()) << a;
  }
  for (auto a : {v1::ATTENTION_IMPL_SDPA_EFFICIENT, v1::ATTENTION_IMPL_SDPA_CUDNN}) {
    spec.set_attention(a);
    const absl::Status s = CheckOptionsForDevice(spec, CpuWorker());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_PRED_FORMAT2(IsSubstring, "benchmark.attention: the", std::string(s.message()));
    EXPECT_PRED_FORMAT2(IsSubstring, "is a CUDA kernel and cpu:0 is a CPU",
                        std::string(s.message()));
  }
  // benchd's fused kernels: CUDA only, in any precision.
  for (auto precision : {v1::PRECISION_FP32, v1::PRECISION_BF16}) {
    spec.set_attention(v1::ATTENTION_IMPL_FUSED);
    spec.set_precision(precision);
    const absl::Status s = CheckOptionsForDevice(spec, CpuWorker());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_PRED_FORMAT2(IsSubstring,
                        "benchmark.attention: fused is benchd's FlashAttention-2 CUDA kernels and "
                        "cpu:0 is a CPU; on a CPU use tiled",
                        std::string(s.message()));
  }
  spec.set_precision(v1::PRECISION_FP32);
  spec.set_attention(v1::ATTENTION_IMPL_FAITHFUL);
  spec.set_cuda_graph(true);
  const absl::Status s = CheckOptionsForDevice(spec, CpuWorker());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(IsSubstring, "benchmark.cuda_graph: CUDA graphs need a CUDA device",
                      std::string(s.message()));
}

class OptionsRunTest : public ::testing::Test {
 protected:
  ModelCache cache_{CpuWorker()};
};

TEST_F(OptionsRunTest, RefusedOptionsAreInvalidArgumentBeforeAnyWork) {
  for (auto a : {v1::ATTENTION_IMPL_SDPA_CUDNN, v1::ATTENTION_IMPL_FUSED}) {
    auto b = TinySpec(v1::BENCHMARK_MODE_FORWARD);
    b.set_attention(a);
    auto r = RunBenchmark(Resolved(b), cache_);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_PRED_FORMAT2(IsSubstring, "benchmark.attention: ", std::string(r.status().message()));
    EXPECT_TRUE(cache_.List().empty());  // refused before a model was built
  }
}

// Past the checks (a caller that skipped them), the model's fused attention
// on a CPU throws the backend's refusal, which the step reports naming the
// field, not as an internal error.
TEST(FusedAttentionTest, TheModelOnACpuRefusesNamingTheReason) {
  TransformerLM lm(Tiny(), torch::TensorOptions().dtype(torch::kFloat32));
  lm->SetAttention(v1::ATTENTION_IMPL_FUSED);
  const auto ids = torch::randint(0, 1000, {2, 8}, torch::kInt64);
  try {
    lm->forward(ids);
    FAIL() << "fused attention ran on a CPU";
  } catch (const AttentionBackendUnavailable& e) {
    EXPECT_PRED_FORMAT2(IsSubstring,
                        "attention fused (benchd's FlashAttention-2 kernels) cannot run on cpu",
                        std::string(e.what()));
    EXPECT_PRED_FORMAT2(IsSubstring, "they are CUDA kernels", std::string(e.what()));
  }
}

TEST_F(OptionsRunTest, OptionsAreEchoedAndTheModelGoesBackToFaithful) {
  auto b = TinySpec(v1::BENCHMARK_MODE_TRAIN_STEP);
  b.set_warmup_auto(true);
  b.set_warmup_max_steps(8);
  b.set_attention(v1::ATTENTION_IMPL_SDPA_MATH);
  b.set_optimizer_impl(v1::OPTIMIZER_IMPL_FOREACH);
  b.set_allow_tf32(true);
  auto r = RunBenchmark(Resolved(b), cache_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->spec().warmup_auto());
  EXPECT_EQ(r->spec().warmup_max_steps(), 8);
  EXPECT_EQ(r->spec().attention(), v1::ATTENTION_IMPL_SDPA_MATH);
  EXPECT_EQ(r->spec().optimizer_impl(), v1::OPTIMIZER_IMPL_FOREACH);
  EXPECT_TRUE(r->spec().allow_tf32());
  EXPECT_FALSE(r->spec().cuda_graph());
  EXPECT_EQ(r->graph_eager_steps(), 0);
  EXPECT_TRUE(r->has_forward() && r->has_backward() && r->has_optimizer());
  // The process-wide switches are back, and so is the resident model.
  EXPECT_TRUE(at::globalContext().userEnabledFlashSDP());
  EXPECT_FALSE(at::globalContext().allowTF32CuBLAS());
  const auto models = cache_.List();
  ASSERT_EQ(models.size(), 1u);
  bool dummy = false;
  auto resident = cache_.Acquire(Tiny(), v1::PRECISION_FP32, 5, &dummy);
  EXPECT_TRUE(dummy);
  EXPECT_EQ(resident->model->layers[0]->attn->attention(), v1::ATTENTION_IMPL_FAITHFUL);
}

TEST_F(OptionsRunTest, WarmupAutoStopsWhereTheRuleSays) {
  for (int64_t cap : {3, 6, 40}) {
    SCOPED_TRACE(cap);
    auto b = TinySpec(v1::BENCHMARK_MODE_FORWARD);
    b.set_warmup_auto(true);
    b.set_warmup_max_steps(cap);
    std::vector<int64_t> totals;
    BenchmarkHooks hooks;
    hooks.on_step = [&](const v1::StepTiming&, int64_t total) { totals.push_back(total); };
    auto r = RunBenchmark(Resolved(b), cache_, hooks);
    ASSERT_TRUE(r.ok()) << r.status();
    const int64_t n = r->warmup_steps_run();
    EXPECT_GE(n, kWarmupWindow);
    EXPECT_LE(n, cap);
    ASSERT_EQ(r->steps_size(), n + 3);
    // The recorded warm-up times, replayed through the rule, stop exactly at n
    // and agree with the convergence flag; no earlier window had converged.
    std::vector<double> times;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_TRUE(r->steps(i).warmup());
      times.push_back(r->steps(i).step_seconds());
      if (i + 1 < n) EXPECT_FALSE(WarmupWindowConverged(times)) << "converged at " << i + 1;
    }
    EXPECT_EQ(r->warmup_converged(), WarmupWindowConverged(times));
    if (!r->warmup_converged()) EXPECT_EQ(n, cap);
    for (int64_t i = n; i < r->steps_size(); ++i) EXPECT_FALSE(r->steps(i).warmup());
    EXPECT_EQ(r->step().count(), 3);
    // The streamed total is the cap's bound during warm-up, then exact.
    ASSERT_EQ(static_cast<int64_t>(totals.size()), n + 3);
    for (int64_t i = 0; i + 1 < n; ++i) EXPECT_EQ(totals[i], cap + 3);
    for (int64_t i = n - 1; i < n + 3; ++i) EXPECT_EQ(totals[i], n + 3);
  }
}

TEST_F(OptionsRunTest, EveryOptimizerPathTrainsTheResidentModelTheSameWay) {
  // Three train_step jobs from the same seed on fresh caches, one per path:
  // the same losses step by step (the parameters agree within rounding).
  std::vector<std::vector<double>> losses;
  for (auto impl :
       {v1::OPTIMIZER_IMPL_FAITHFUL, v1::OPTIMIZER_IMPL_FOREACH, v1::OPTIMIZER_IMPL_FUSED}) {
    ModelCache cache(CpuWorker());
    auto b = TinySpec(v1::BENCHMARK_MODE_TRAIN_STEP);
    b.set_warmup_steps(0);
    b.set_measure_steps(4);
    b.set_optimizer_impl(impl);
    auto r = RunBenchmark(Resolved(b), cache);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->spec().optimizer_impl(), impl);
    std::vector<double> l;
    for (const auto& s : r->steps()) l.push_back(s.loss());
    losses.push_back(l);
  }
  ASSERT_GT(losses[0][0] - losses[0][3], 1e-3);  // it did train
  for (size_t k = 1; k < losses.size(); ++k) {
    for (size_t i = 0; i < losses[0].size(); ++i) {
      EXPECT_NEAR(losses[k][i], losses[0][i], 1e-5 * losses[0][i]) << "path " << k << " step " << i;
    }
  }
}

}  // namespace
}  // namespace benchd::worker
