// benchd's fused FlashAttention-2 kernels (the `fused` attention) on the
// first GPU: forward and backward against the tiled algorithm in fp32 math
// (worker/flash/tiled_attention.h) on the same rounded inputs, the autograd
// function under autocast, the attention request, and the model's steps
// against faithful attention. Skipped where CUDA is not available.
//
// Error measure (bench/flash_attention/flash_harness.py's): ‖x − ref‖ /
// max(‖ref‖, 1e-3·√n), with ref in fp32 from the bf16/fp16 inputs. The
// tolerances are twice the harness's bounds, which its H100 runs passed with
// the worst case below half of them (bench/flash_attention/RESULTS.md): bf16
// O 1e-2, dQ/dK/dV 2e-2; fp16 O 2e-3, grads 2e-3; fp32 2e-5; L 1e-4 in every
// dtype. Where a reference is zero but for rounding (dQ and dK with one key:
// dS = P∘(dP − D) is 0 in exact arithmetic), i.e. ‖ref‖ < 1e-3·√n, the
// largest absolute error must stay under bf16 1e-2, fp16 1e-3, fp32 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/model_config.h"
#include "common/options.h"
#include "worker/attention_backend.h"
#include "worker/attention_run.h"
#include "worker/autocast_guard.h"
#include "worker/benchmark.h"
#include "worker/flash/fused_attention.h"
#include "worker/flash/tiled_attention.h"
#include "worker/model_cache.h"

namespace benchd::worker {
namespace {

class CudaFusedAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    device_ = *ParseWorkerDevice("cuda:0");
  }
  WorkerDevice device_{"", torch::Device(torch::kCPU), ""};
};

struct FusedTolerance {
  double out, lse, grad, zero;
};

FusedTolerance FusedToleranceOf(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16:
      return {1e-2, 1e-4, 2e-2, 1e-2};
    case at::kHalf:
      return {2e-3, 1e-4, 2e-3, 1e-3};
    default:
      return {2e-5, 1e-4, 2e-5, 1e-5};
  }
}

// The harness's measure; the largest absolute error where ref is zero but for
// rounding.
double HarnessError(const torch::Tensor& x, const torch::Tensor& ref, bool* zero_ref) {
  const torch::Tensor a = x.to(torch::kFloat64), r = ref.to(torch::kFloat64);
  const double ref_norm = r.norm().item<double>();
  const double floor = 1e-3 * std::sqrt(static_cast<double>(r.numel()));
  *zero_ref = ref_norm < floor;
  if (*zero_ref) return (a - r).abs().max().item<double>();
  return (a - r).norm().item<double>() / ref_norm;
}

void ExpectNearReference(const std::string& what, const torch::Tensor& x, const torch::Tensor& ref,
                         double tol, double zero_tol) {
  ASSERT_EQ(x.sizes(), ref.sizes()) << what;
  ASSERT_FALSE(x.isnan().any().item<bool>()) << what << ": NaN (an element never written?)";
  bool zero_ref = false;
  const double err = HarnessError(x, ref, &zero_ref);
  EXPECT_LE(err, zero_ref ? zero_tol : tol)
      << what << (zero_ref ? ": max abs error " : ": norm-relative error ") << err;
}

struct FusedCase {
  int64_t batch, heads, seq_q, seq_k;
  bool causal;
  bool strided;  // [B, S, H, d] tensors transposed to [B, H, S, d], as the model's v
};

std::string FusedCaseName(const FusedCase& c, at::ScalarType dtype, int64_t d) {
  return std::string(c10::toString(dtype)) + " d" + std::to_string(d) + " B" +
         std::to_string(c.batch) + " H" + std::to_string(c.heads) + " Sq" +
         std::to_string(c.seq_q) + " Sk" + std::to_string(c.seq_k) + (c.causal ? " causal" : "") +
         (c.strided ? " strided" : "");
}

// [B, H, S, d] on the GPU in `dtype`, drawn in fp32 from the global generator.
torch::Tensor DrawOnGpu(int64_t b, int64_t h, int64_t s, int64_t d, at::ScalarType dtype,
                        bool strided) {
  const auto on = torch::TensorOptions().device(torch::kCUDA).dtype(dtype);
  if (strided) return torch::randn({b, s, h, d}).to(on).transpose(1, 2);
  return torch::randn({b, h, s, d}).to(on);
}

// Odd lengths (partial tiles everywhere), one key, non-causal, Sq != Sk, the
// model's strided layout; d 64 and 128 take the Hopper kernels on an H100.
const std::vector<FusedCase>& FusedCases() {
  static const std::vector<FusedCase> cases = {
      {2, 3, 1, 1, true, false},       {2, 3, 17, 17, true, false},
      {1, 2, 333, 333, true, false},   {1, 2, 333, 333, true, true},
      {2, 2, 1000, 1000, true, false}, {1, 2, 100, 100, false, false},
      {1, 2, 100, 257, false, true},
  };
  return cases;
}

void CheckAgainstTiled(at::ScalarType dtype, int64_t d, const FusedCase& c) {
  SCOPED_TRACE(FusedCaseName(c, dtype, d));
  torch::manual_seed(11);
  const torch::Tensor q = DrawOnGpu(c.batch, c.heads, c.seq_q, d, dtype, c.strided);
  const torch::Tensor k = DrawOnGpu(c.batch, c.heads, c.seq_k, d, dtype, c.strided);
  const torch::Tensor v = DrawOnGpu(c.batch, c.heads, c.seq_k, d, dtype, c.strided);
  const torch::Tensor dout = DrawOnGpu(c.batch, c.heads, c.seq_q, d, dtype, false);
  FusedForward f = FusedAttentionForward(q, k, v, c.causal);
  FusedGrads g = FusedAttentionBackward(q, k, v, f.out, f.lse, dout, c.causal);
  EXPECT_EQ(f.out.scalar_type(), dtype);
  EXPECT_EQ(g.dq.scalar_type(), dtype);

  const TiledAttentionOptions o{.causal = c.causal};
  const torch::Tensor qf = q.to(torch::kFloat), kf = k.to(torch::kFloat), vf = v.to(torch::kFloat);
  TiledForward ref = TiledAttentionForward(qf, kf, vf, o);
  TiledGrads ref_g =
      TiledAttentionBackward(qf, kf, vf, ref.out, ref.lse, dout.to(torch::kFloat), o);
  const FusedTolerance tol = FusedToleranceOf(dtype);
  ExpectNearReference("O", f.out, ref.out, tol.out, tol.zero);
  ExpectNearReference("L", f.lse, ref.lse, tol.lse, tol.zero);
  ExpectNearReference("dQ", g.dq, ref_g.dq, tol.grad, tol.zero);
  ExpectNearReference("dK", g.dk, ref_g.dk, tol.grad, tol.zero);
  ExpectNearReference("dV", g.dv, ref_g.dv, tol.grad, tol.zero);
}

TEST_F(CudaFusedAttentionTest, Bf16AndFp16ForwardAndBackwardMatchTheTiledReference) {
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    for (int64_t d : {64, 128}) {
      for (const FusedCase& c : FusedCases()) CheckAgainstTiled(dtype, d, c);
    }
  }
}

TEST_F(CudaFusedAttentionTest, TheSmallHeadDimsAndFloat32MatchTheTiledReference) {
  // d 16 and 32 (mma.sync everywhere), and the float32 kernels at every head dim.
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    for (int64_t d : {16, 32}) {
      for (const FusedCase& c : {FusedCases()[1], FusedCases()[2], FusedCases()[6]})
        CheckAgainstTiled(dtype, d, c);
    }
  }
  for (int64_t d : {16, 32, 64, 128}) {
    for (const FusedCase& c : {FusedCases()[0], FusedCases()[2], FusedCases()[6]})
      CheckAgainstTiled(at::kFloat, d, c);
  }
}

// The autograd function as the model calls it: under bf16 autocast, q and k
// in float32 (RoPE's output), v a bf16 strided view. The kernels run in bf16;
// each gradient comes back in its input's dtype.
TEST_F(CudaFusedAttentionTest, TheAutogradFunctionUnderAutocastGivesTheTiledGradients) {
  torch::manual_seed(5);
  const int64_t b = 2, h = 3, s = 77, d = 64;
  const torch::Tensor q0 = DrawOnGpu(b, h, s, d, at::kFloat, false);
  const torch::Tensor k0 = DrawOnGpu(b, h, s, d, at::kFloat, false);
  const torch::Tensor v0 = DrawOnGpu(b, h, s, d, at::kBFloat16, true);
  const torch::Tensor dout = DrawOnGpu(b, h, s, d, at::kBFloat16, false);
  torch::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true);
  torch::Tensor v = v0.detach().requires_grad_(true);
  torch::Tensor out;
  {
    AutocastGuard autocast(torch::kCUDA, at::kBFloat16);
    out = FusedAttention(q, k, v, /*causal=*/true);
  }
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  out.backward(dout);
  ASSERT_TRUE(q.grad().defined() && k.grad().defined() && v.grad().defined());
  EXPECT_EQ(q.grad().scalar_type(), at::kFloat);
  EXPECT_EQ(v.grad().scalar_type(), at::kBFloat16);

  // The reference: fp32 math on the bf16-rounded inputs the kernels saw.
  const TiledAttentionOptions o{.causal = true};
  const torch::Tensor qf = q0.to(at::kBFloat16).to(at::kFloat);
  const torch::Tensor kf = k0.to(at::kBFloat16).to(at::kFloat);
  const torch::Tensor vf = v0.to(at::kFloat);
  TiledForward ref = TiledAttentionForward(qf, kf, vf, o);
  TiledGrads g = TiledAttentionBackward(qf, kf, vf, ref.out, ref.lse, dout.to(at::kFloat), o);
  const FusedTolerance tol = FusedToleranceOf(at::kBFloat16);
  ExpectNearReference("O", out.detach(), ref.out, tol.out, tol.zero);
  ExpectNearReference("dQ", q.grad(), g.dq, tol.grad, tol.zero);
  ExpectNearReference("dK", k.grad(), g.dk, tol.grad, tol.zero);
  ExpectNearReference("dV", v.grad(), g.dv, tol.grad, tol.zero);
}

TEST_F(CudaFusedAttentionTest, WhatTheKernelsLackIsRefusedAsUnavailable) {
  const auto on = torch::TensorOptions().device(torch::kCUDA);
  auto refused = [](const torch::Tensor& q, const std::string& why) {
    try {
      FusedAttention(q, q, q, true);
      ADD_FAILURE() << "ran: " << q.sizes() << " " << q.scalar_type();
    } catch (const AttentionBackendUnavailable& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused(torch::randn({1, 2, 8, 48}, on.dtype(at::kBFloat16)),
          "head dims 16, 32, 64 and 128, got 48");
  refused(torch::randn({1, 2, 8, 64}, on.dtype(at::kDouble)),
          "the kernels take float32, bf16 or fp16, got Double");
  refused(torch::randn({2, 8, 64}, on.dtype(at::kHalf)), "[batch, heads, seq_len, head_dim]");
  EXPECT_EQ(FusedAttentionRefusal(torch::randn({1, 1, 4, 32}, on), torch::randn({1, 1, 4, 32}, on),
                                  torch::randn({1, 1, 4, 32}, on)),
            "");
}

v1::AttentionSpec FusedCell(v1::Precision precision, int64_t head_dim, bool causal, bool heads) {
  v1::JobSpec job;
  v1::AttentionSpec* a = job.mutable_attention();
  a->set_batch_size(4);
  if (heads) a->set_num_heads(4);
  a->set_head_dim(head_dim);
  a->set_seq_len(1023);
  a->set_causal(causal);
  a->set_implementation(v1::ATTENTION_IMPL_FUSED);
  a->set_precision(precision);
  a->set_warmup_passes(2);
  a->set_passes(5);
  auto resolved = ResolveJobSpec(job);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved->attention();
}

// The request: every precision (float32 on the CUDA-core kernels), with and
// without heads, causal or not; the backward keeps the output and its
// logsumexp only, as the formula says.
TEST_F(CudaFusedAttentionTest, TheAttentionRequestRunsAndKeepsTheOutputAndLogsumexpOnly) {
  for (auto precision : {v1::PRECISION_BF16, v1::PRECISION_FP16, v1::PRECISION_FP32}) {
    for (int64_t d : {64, 128}) {
      for (bool causal : {true, false}) {
        for (bool heads : {true, false}) {
          const v1::AttentionSpec spec = FusedCell(precision, d, causal, heads);
          SCOPED_TRACE(spec.ShortDebugString());
          v1::JobSpec job;
          *job.mutable_attention() = spec;
          ASSERT_TRUE(CheckKindForDevice(job, "cuda:0").ok());  // what the daemon checks first
          auto r = RunAttention(spec, device_);
          ASSERT_TRUE(r.ok()) << r.status();
          EXPECT_EQ(r->spec().implementation(), v1::ATTENTION_IMPL_FUSED);
          EXPECT_EQ(r->timer(), "cuda_event");
          EXPECT_GT(r->forward().median(), 0);
          EXPECT_GT(r->backward().median(), 0);
          EXPECT_EQ(r->saved_score_matrices(), 0);
          EXPECT_GE(r->saved_activation_bytes(), r->saved_by_formula_bytes());
          EXPECT_LE(r->saved_activation_bytes(), r->saved_by_formula_bytes() + (int64_t{2} << 20));
          EXPECT_LT(r->saved_activation_bytes(), r->score_matrix_bytes() / 2);
        }
      }
    }
  }
}

v1::BenchmarkSpec FusedModelStep(int64_t d_model, int64_t heads, v1::Precision precision,
                                 v1::AttentionImpl attention, v1::BenchmarkMode mode) {
  v1::BenchmarkSpec b;
  v1::ModelConfig* m = b.mutable_model();
  m->set_vocab_size(1000);
  m->set_d_model(d_model);
  m->set_num_heads(heads);
  m->set_num_layers(2);
  m->set_d_ff(4 * d_model);
  b.set_mode(mode);
  b.set_precision(precision);
  b.set_batch_size(4);
  b.set_context_length(100);  // not a multiple of any tile
  b.set_warmup_steps(2);
  b.set_measure_steps(4);
  b.set_seed(7);
  b.set_attention(attention);
  v1::JobSpec job;
  *job.mutable_benchmark() = b;
  auto resolved = ResolveJobSpec(job);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved.ok() ? resolved->benchmark() : v1::BenchmarkSpec();
}

std::vector<double> FusedStepLosses(const v1::BenchmarkResult& r) {
  std::vector<double> out;
  for (const auto& s : r.steps()) out.push_back(s.loss());
  return out;
}

// Train steps of the model with fused attention against faithful attention
// from the same seed, at head dims 16, 64 and 128: every step's loss (the
// later ones after AdamW updates made from the fused gradients) within fp32
// 1e-4 and bf16 1e-2 of faithful's, relative. (bf16: faithful rounds the
// scores to bf16 before its softmax, the kernels keep them in fp32.)
TEST_F(CudaFusedAttentionTest, ModelTrainStepsGiveTheFaithfulLosses) {
  struct Shape {
    int64_t d_model, heads;
  };
  for (const Shape& shape : {Shape{64, 4}, Shape{128, 2}, Shape{256, 2}}) {
    for (auto precision : {v1::PRECISION_FP32, v1::PRECISION_BF16}) {
      SCOPED_TRACE("head dim " + std::to_string(shape.d_model / shape.heads) + " " +
                   PrecisionName(precision));
      ModelCache faithful_cache(device_), fused_cache(device_);
      auto faithful =
          RunBenchmark(FusedModelStep(shape.d_model, shape.heads, precision,
                                      v1::ATTENTION_IMPL_FAITHFUL, v1::BENCHMARK_MODE_TRAIN_STEP),
                       faithful_cache);
      ASSERT_TRUE(faithful.ok()) << faithful.status();
      auto fused =
          RunBenchmark(FusedModelStep(shape.d_model, shape.heads, precision,
                                      v1::ATTENTION_IMPL_FUSED, v1::BENCHMARK_MODE_TRAIN_STEP),
                       fused_cache);
      ASSERT_TRUE(fused.ok()) << fused.status();
      EXPECT_EQ(fused->spec().attention(), v1::ATTENTION_IMPL_FUSED);
      const auto a = FusedStepLosses(*faithful), b = FusedStepLosses(*fused);
      ASSERT_EQ(a.size(), b.size());
      const double tol = precision == v1::PRECISION_FP32 ? 1e-4 : 1e-2;
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], tol * a[i]) << "step " << i;
      EXPECT_LT(b.back(), b.front());  // it trained
      // The model is back to faithful attention after the job.
      bool resident = false;
      auto model = fused_cache.Acquire(fused->spec().model(), precision, 7, &resident);
      EXPECT_TRUE(resident);
      EXPECT_EQ(model->model->layers[0]->attn->attention(), v1::ATTENTION_IMPL_FAITHFUL);
    }
  }
}

// A CUDA graph captures the kernels (they launch on the current stream, the
// workspace comes from the caching allocator): replays give the eager losses.
TEST_F(CudaFusedAttentionTest, AGraphOfTheFusedStepReplaysTheEagerLosses) {
  auto spec = FusedModelStep(128, 2, v1::PRECISION_BF16, v1::ATTENTION_IMPL_FUSED,
                             v1::BENCHMARK_MODE_FORWARD_BACKWARD);
  ModelCache eager_cache(device_), graph_cache(device_);
  auto eager = RunBenchmark(spec, eager_cache);
  ASSERT_TRUE(eager.ok()) << eager.status();
  spec.set_cuda_graph(true);
  auto graph = RunBenchmark(spec, graph_cache);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_TRUE(graph->spec().cuda_graph());
  const auto e = FusedStepLosses(*eager), g = FusedStepLosses(*graph);
  ASSERT_EQ(e.size(), g.size());
  for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(g[i], e[i], 1e-3 * e[i]) << "step " << i;
}

// A model whose head dim the kernels lack is refused before any work,
// naming the field.
TEST_F(CudaFusedAttentionTest, AHeadDimTheKernelsLackIsRefusedNamingTheField) {
  ModelCache cache(device_);
  auto r = RunBenchmark(FusedModelStep(160, 2, v1::PRECISION_BF16, v1::ATTENTION_IMPL_FUSED,
                                       v1::BENCHMARK_MODE_FORWARD),
                        cache);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("benchmark.attention: fused (benchd's FlashAttention-2 "
                                      "kernels) takes head dims 16, 32, 64 or 128 and this "
                                      "job's is 80"),
            std::string::npos)
      << r.status();
  EXPECT_TRUE(cache.List().empty());
}

}  // namespace
}  // namespace benchd::worker
