// The options on the first GPU: CUDA-graph replay against eager steps, the
// forced SDPA backends, TF32, weight copies and their kernel. Skipped where CUDA is not available.
#include <gtest/gtest.h>

#include <ATen/Context.h>

#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/model_config.h"
#include "common/options.h"
#include "worker/adamw.h"
#include "worker/benchmark.h"

namespace benchd::worker {
namespace {

v1::BenchmarkSpec Spec(v1::BenchmarkMode mode, v1::Precision precision, int64_t warmup,
                       int64_t measure) {
  v1::BenchmarkSpec b;
  b.mutable_model()->set_preset("tiny");
  b.set_mode(mode);
  b.set_precision(precision);
  b.set_batch_size(4);
  b.set_context_length(64);
  b.set_warmup_steps(warmup);
  b.set_measure_steps(measure);
  b.set_seed(7);
  if (mode == v1::BENCHMARK_MODE_TRAIN_STEP) b.set_optimizer_impl(v1::OPTIMIZER_IMPL_FOREACH);
  return b;
}

v1::BenchmarkSpec Resolved(const v1::BenchmarkSpec& b) {
  v1::JobSpec job;
  *job.mutable_benchmark() = b;
  auto resolved = ResolveJobSpec(job);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved.ok() ? resolved->benchmark() : v1::BenchmarkSpec();
}

std::vector<double> Losses(const v1::BenchmarkResult& r) {
  std::vector<double> out;
  for (const auto& s : r.steps()) out.push_back(s.loss());
  return out;
}

class CudaOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    torch::empty({1}, torch::kCUDA);
    device_ = *ParseWorkerDevice("cuda:0");
  }
  WorkerDevice device_{"", torch::kCPU, ""};
};

TEST_F(CudaOptionsTest, GraphReplayGivesTheEagerLosses) {
  for (auto mode : {v1::BENCHMARK_MODE_FORWARD, v1::BENCHMARK_MODE_FORWARD_BACKWARD,
                    v1::BENCHMARK_MODE_TRAIN_STEP}) {
    for (auto precision : {v1::PRECISION_FP32, v1::PRECISION_BF16}) {
      SCOPED_TRACE(ModeName(mode) + " " + PrecisionName(precision));
      auto spec = Spec(mode, precision, /*warmup=*/3, /*measure=*/5);
      ModelCache eager_cache(device_), graph_cache(device_);
      auto eager = RunBenchmark(Resolved(spec), eager_cache);
      ASSERT_TRUE(eager.ok()) << eager.status();
      spec.set_cuda_graph(true);
      auto graph = RunBenchmark(Resolved(spec), graph_cache);
      ASSERT_TRUE(graph.ok()) << graph.status();

      EXPECT_TRUE(graph->spec().cuda_graph());
      EXPECT_EQ(graph->graph_eager_steps(), kGraphEagerSteps);
      EXPECT_FALSE(graph->has_forward());
      EXPECT_FALSE(graph->has_backward());
      EXPECT_FALSE(graph->has_optimizer());
      EXPECT_EQ(graph->step().count(), 5);
      ASSERT_EQ(graph->steps_size(), 8);
      for (int i = 0; i < 8; ++i) {
        const auto& t = graph->steps(i);
        EXPECT_GT(t.step_seconds(), 0);
        // The eager steps have phases; the replays cannot.
        EXPECT_EQ(t.forward_seconds() > 0, i < kGraphEagerSteps) << i;
      }
      // Same seed, same kernels: every step's loss (the training ones too, so
      // the replayed optimizer updates the weights as eager steps do).
      const auto e = Losses(*eager), g = Losses(*graph);
      ASSERT_EQ(e.size(), g.size());
      const double tol = precision == v1::PRECISION_FP32 ? 1e-5 : 1e-3;
      for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(g[i], e[i], tol * e[i]) << "step " << i;
      if (mode == v1::BENCHMARK_MODE_TRAIN_STEP)
        EXPECT_LT(g.back(), g.front() - 1e-3);  // it trained
    }
  }
}

TEST_F(CudaOptionsTest, FusedAndFaithfulRunEagerlyAfterTheReplayedForwardBackward) {
  for (auto impl : {v1::OPTIMIZER_IMPL_FUSED, v1::OPTIMIZER_IMPL_FAITHFUL}) {
    SCOPED_TRACE(OptimizerImplName(impl));
    auto spec =
        Spec(v1::BENCHMARK_MODE_TRAIN_STEP, v1::PRECISION_BF16, /*warmup=*/3, /*measure=*/5);
    spec.set_optimizer_impl(impl);
    ModelCache eager_cache(device_), graph_cache(device_);
    auto eager = RunBenchmark(Resolved(spec), eager_cache);
    ASSERT_TRUE(eager.ok()) << eager.status();
    spec.set_cuda_graph(true);
    auto graph = RunBenchmark(Resolved(spec), graph_cache);
    ASSERT_TRUE(graph.ok()) << graph.status();
    EXPECT_FALSE(graph->has_forward());
    EXPECT_TRUE(graph->has_optimizer());
    EXPECT_GT(graph->optimizer().median(), 0);
    EXPECT_LT(graph->optimizer().median(), graph->step().median());
    const auto e = Losses(*eager), g = Losses(*graph);
    ASSERT_EQ(e.size(), g.size());
    for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(g[i], e[i], 1e-3 * e[i]) << "step " << i;
    EXPECT_LT(g.back(), g.front() - 1e-3);  // the eager optimizer did update the replayed weights
  }
}

TEST_F(CudaOptionsTest, AfterAGraphJobTheStepCountsAreTheReplays) {
  // A graph job of 2 eager + 4 replayed train steps, then a faithful eager
  // job on the same resident model, against 6 foreach steps then the same
  // faithful job: the bias correction of the 7th step must use t = 7.
  ModelCache graph_cache(device_), eager_cache(device_);
  auto spec = Spec(v1::BENCHMARK_MODE_TRAIN_STEP, v1::PRECISION_FP32, 2, 4);
  auto eager = RunBenchmark(Resolved(spec), eager_cache);
  ASSERT_TRUE(eager.ok()) << eager.status();
  spec.set_cuda_graph(true);
  auto graph = RunBenchmark(Resolved(spec), graph_cache);
  ASSERT_TRUE(graph.ok()) << graph.status();
  bool resident = false;
  auto model = graph_cache.Acquire(graph->spec().model(), v1::PRECISION_FP32, 7, &resident);
  ASSERT_TRUE(resident);
  for (int64_t t : model->optimizer->Steps()) EXPECT_EQ(t, 6);
  model.reset();

  auto next = Spec(v1::BENCHMARK_MODE_TRAIN_STEP, v1::PRECISION_FP32, 0, 2);
  next.set_optimizer_impl(v1::OPTIMIZER_IMPL_FAITHFUL);
  auto a = RunBenchmark(Resolved(next), eager_cache);
  auto b = RunBenchmark(Resolved(next), graph_cache);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(b->steps(i).loss(), a->steps(i).loss(), 1e-5 * a->steps(i).loss()) << i;
  }
}

TEST_F(CudaOptionsTest, ForcedBackendsRunAndAgreeWithFaithful) {
  ModelCache cache(device_);
  auto base = Spec(v1::BENCHMARK_MODE_FORWARD_BACKWARD, v1::PRECISION_BF16, 1, 2);
  auto faithful = RunBenchmark(Resolved(base), cache);
  ASSERT_TRUE(faithful.ok()) << faithful.status();
  for (auto a :
       {v1::ATTENTION_IMPL_SDPA, v1::ATTENTION_IMPL_SDPA_FLASH, v1::ATTENTION_IMPL_SDPA_EFFICIENT,
        v1::ATTENTION_IMPL_SDPA_CUDNN, v1::ATTENTION_IMPL_SDPA_MATH}) {
    SCOPED_TRACE(AttentionName(a));
    auto spec = base;
    spec.set_attention(a);
    auto r = RunBenchmark(Resolved(spec), cache);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->spec().attention(), a);
    // bf16: the kernels round differently; the loss agrees to bf16 precision.
    EXPECT_NEAR(r->steps(0).loss(), faithful->steps(0).loss(), 1e-2 * faithful->steps(0).loss());
  }
  EXPECT_TRUE(at::globalContext().userEnabledMathSDP());
  EXPECT_TRUE(at::globalContext().userEnabledFlashSDP());

  // fp32 flash is refused up front, naming the field.
  auto fp32 = Spec(v1::BENCHMARK_MODE_FORWARD, v1::PRECISION_FP32, 1, 1);
  fp32.set_attention(v1::ATTENTION_IMPL_SDPA_FLASH);
  auto refused = RunBenchmark(Resolved(fp32), cache);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find("benchmark.attention"), std::string::npos);
}

TEST_F(CudaOptionsTest, Tf32IsOnForTheJobOnly) {
  ModelCache cache(device_);
  auto spec = Spec(v1::BENCHMARK_MODE_FORWARD, v1::PRECISION_FP32, 1, 2);
  auto full = RunBenchmark(Resolved(spec), cache);
  spec.set_allow_tf32(true);
  auto tf32 = RunBenchmark(Resolved(spec), cache);
  ASSERT_TRUE(full.ok() && tf32.ok());
  EXPECT_TRUE(tf32->spec().allow_tf32());
  EXPECT_FALSE(full->spec().allow_tf32());
  // TF32 keeps 10 mantissa bits: close, not (necessarily) equal.
  EXPECT_NEAR(tf32->steps(0).loss(), full->steps(0).loss(), 1e-2 * full->steps(0).loss());
  EXPECT_FALSE(at::globalContext().allowTF32CuBLAS());
}

TEST_F(CudaOptionsTest, WeightCopyKernelGivesTheCpuUpdate) {
  // The CUDA kernel against the ATen update the CPU runs, 3 steps, on
  // tensors whose sizes take the vector path, its tail and (an fp32 weight
  // at an odd offset) the scalar path.
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(c10::toString(dtype));
    torch::manual_seed(5);
    std::vector<torch::Tensor> init = {torch::randn({256, 64}) * 0.05, torch::randn({1001}) * 0.05,
                                       (torch::randn({1001}) * 0.05).narrow(0, 1, 1000)};
    auto run = [&](const torch::Device& device) {
      std::vector<torch::Tensor> params, copies;
      std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs;
      for (const auto& x : init) {
        // Copies of init (x.to(kCPU) would be x itself), the odd offset kept on the GPU.
        params.push_back(device.is_cuda() && x.storage_offset() > 0
                             ? torch::randn({1001}, device).narrow(0, 1, 1000).copy_(x)
                             : x.to(device, /*non_blocking=*/false, /*copy=*/true));
        copies.push_back(params.back().to(dtype).requires_grad_(true));
        pairs.emplace_back(params.back(), copies.back());
      }
      AdamW opt(params);
      opt.SetWeightCopies(pairs);
      torch::manual_seed(6);
      for (int s = 0; s < 3; ++s) {
        for (auto& c : copies)
          c.mutable_grad() = (torch::randn(c.sizes()) * 1e-2).to(device, dtype);
        opt.StepFused();
      }
      for (size_t i = 0; i < params.size(); ++i) {
        // Each copy is its weight rounded, on the device that wrote it.
        EXPECT_TRUE(torch::equal(copies[i], params[i].to(dtype))) << device << " " << i;
      }
      return params;
    };
    const auto cpu = run(torch::kCPU);
    const auto gpu = run(device_.device);
    ASSERT_EQ(init[2].storage_offset(), 1);
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_GT((gpu[i].cpu() - init[i]).abs().max().item<double>(), 1e-3) << i;  // moved
      const double diff =
          ((gpu[i].cpu().to(at::kDouble) - cpu[i].to(at::kDouble)).abs() / (cpu[i].abs() + 1e-3))
              .max()
              .item<double>();
      EXPECT_LT(diff, 1e-6) << i;
    }
  }
}

TEST_F(CudaOptionsTest, WeightCopiesTrainAsAutocastDoes) {
  // The same losses step after step with and without copies (fused AdamW
  // both), eagerly and as replays of a CUDA graph; forward-only too.
  for (auto precision : {v1::PRECISION_BF16, v1::PRECISION_FP16}) {
    for (bool graph : {false, true}) {
      SCOPED_TRACE(PrecisionName(precision) + (graph ? " graph" : " eager"));
      auto spec = Spec(v1::BENCHMARK_MODE_TRAIN_STEP, precision, /*warmup=*/3, /*measure=*/5);
      spec.set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
      spec.set_cuda_graph(graph);
      ModelCache plain_cache(device_), copies_cache(device_);
      auto plain = RunBenchmark(Resolved(spec), plain_cache);
      ASSERT_TRUE(plain.ok()) << plain.status();
      spec.set_weight_copies(true);
      auto copies = RunBenchmark(Resolved(spec), copies_cache);
      ASSERT_TRUE(copies.ok()) << copies.status();
      EXPECT_TRUE(copies->spec().weight_copies());
      EXPECT_FALSE(plain->spec().weight_copies());
      const auto p = Losses(*plain), c = Losses(*copies);
      ASSERT_EQ(p.size(), c.size());
      for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(c[i], p[i], 1e-3 * p[i]) << "step " << i;
      EXPECT_LT(c.back(), c.front() - 1e-3);  // it trained
      // The job's copies are gone after it: the next job casts again.
      bool was_resident = false;
      auto resident =
          copies_cache.Acquire(Resolved(spec).model(), precision, spec.seed(), &was_resident);
      EXPECT_TRUE(was_resident);
      EXPECT_FALSE(resident->model->lm_head->weight_copy.defined());
    }
  }
  auto fwd = Spec(v1::BENCHMARK_MODE_FORWARD, v1::PRECISION_BF16, 2, 3);
  ModelCache cache(device_);
  auto plain = RunBenchmark(Resolved(fwd), cache);
  fwd.set_weight_copies(true);
  auto copies = RunBenchmark(Resolved(fwd), cache);
  ASSERT_TRUE(plain.ok() && copies.ok());
  EXPECT_EQ(Losses(*plain), Losses(*copies));
}

TEST_F(CudaOptionsTest, FusedRopeIsTheCoursesRope) {
  // On the heads view of a projection (strided), in every dtype: the forward
  // is the course's ops' result bit for bit; the backward agrees with theirs
  // to the input dtype's rounding (they round each term, the kernel once).
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    SCOPED_TRACE(c10::toString(dtype));
    torch::manual_seed(8);
    RotaryEmbedding rope(64, 10000.0);
    const auto proj =
        torch::randn({2, 48, 4 * 64}, torch::TensorOptions().device(device_.device)).to(dtype);
    const torch::Tensor grad_out = torch::randn({2, 4, 48, 64}, proj.options().dtype(at::kFloat));
    auto run = [&](bool fused) {
      rope->fused = fused;
      // [B, T, H, D] -> the strided [B, H, T, D] view the model hands RoPE.
      torch::Tensor x = proj.detach().view({2, 48, 4, 64}).requires_grad_(true);
      torch::Tensor y = rope->forward(x.transpose(1, 2));
      y.backward(grad_out);
      return std::make_pair(y.detach(), x.grad());
    };
    const auto [faithful, faithful_grad] = run(false);
    const auto [fused, fused_grad] = run(true);
    EXPECT_EQ(fused.scalar_type(), at::kFloat);
    EXPECT_TRUE(fused.is_contiguous());
    EXPECT_TRUE(torch::equal(fused, faithful));
    EXPECT_EQ(fused_grad.scalar_type(), dtype);
    const double tol = dtype == at::kFloat ? 1e-6 : (dtype == at::kHalf ? 2e-3 : 1.6e-2);
    EXPECT_TRUE(torch::allclose(fused_grad.to(at::kFloat), faithful_grad.to(at::kFloat), tol, tol))
        << (fused_grad.to(at::kFloat) - faithful_grad.to(at::kFloat)).abs().max().item<double>();
  }
}

TEST_F(CudaOptionsTest, FusedOpsTrainAsTheFaithfulOpsDo) {
  for (auto precision : {v1::PRECISION_FP32, v1::PRECISION_BF16}) {
    SCOPED_TRACE(PrecisionName(precision));
    auto spec = Spec(v1::BENCHMARK_MODE_TRAIN_STEP, precision, /*warmup=*/2, /*measure=*/4);
    ModelCache faithful_cache(device_), fused_cache(device_);
    auto faithful = RunBenchmark(Resolved(spec), faithful_cache);
    ASSERT_TRUE(faithful.ok()) << faithful.status();
    spec.set_fused_ops(true);
    auto fused = RunBenchmark(Resolved(spec), fused_cache);
    ASSERT_TRUE(fused.ok()) << fused.status();
    EXPECT_TRUE(fused->spec().fused_ops());
    EXPECT_FALSE(faithful->spec().fused_ops());
    const auto a = Losses(*faithful), b = Losses(*fused);
    const double tol = precision == v1::PRECISION_FP32 ? 1e-5 : 2e-3;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], tol * a[i]) << "step " << i;
  }
}

TEST_F(CudaOptionsTest, OptimizerOverlapGivesTheSequentialNumbers) {
  // The fast options (bf16, weight copies, fused ops, fused AdamW) with and
  // without optimizer_overlap, eagerly and as replays of a CUDA graph (the
  // updates captured on the side stream): the same losses and the same fp32
  // weights and step counts after the job, bit for bit wherever the
  // sequential job itself repeats bit for bit (a second sequential job is the
  // control: a GPU kernel with atomics would make both differ by rounding).
  for (bool graph : {false, true}) {
    SCOPED_TRACE(graph ? "graph" : "eager");
    auto spec =
        Spec(v1::BENCHMARK_MODE_TRAIN_STEP, v1::PRECISION_BF16, /*warmup=*/3, /*measure=*/5);
    spec.set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
    spec.set_weight_copies(true);
    spec.set_fused_ops(true);
    spec.set_cuda_graph(graph);
    struct Run {
      std::vector<double> losses;
      std::vector<torch::Tensor> params;
      std::vector<int64_t> steps;
      bool has_optimizer = false;
    };
    auto run = [&](bool overlap) {
      spec.set_optimizer_overlap(overlap);
      ModelCache cache(device_);
      auto r = RunBenchmark(Resolved(spec), cache);
      EXPECT_TRUE(r.ok()) << r.status();
      Run out;
      if (!r.ok()) return out;
      EXPECT_EQ(r->spec().optimizer_overlap(), overlap);
      out.losses = Losses(*r);
      out.has_optimizer = r->has_optimizer();
      bool resident = false;
      auto m = cache.Acquire(r->spec().model(), v1::PRECISION_BF16, spec.seed(), &resident);
      EXPECT_TRUE(resident);
      for (const auto& p : m->model->parameters()) out.params.push_back(p.detach().clone());
      out.steps = m->optimizer->Steps();
      return out;
    };
    const Run sequential = run(false), again = run(false), overlapped = run(true);
    ASSERT_EQ(overlapped.params.size(), sequential.params.size());
    ASSERT_EQ(again.params.size(), sequential.params.size());
    bool repeats = again.losses == sequential.losses;
    for (size_t i = 0; i < sequential.params.size(); ++i) {
      repeats = repeats && torch::equal(again.params[i], sequential.params[i]);
    }
    EXPECT_TRUE(repeats) << "the sequential job does not repeat bit for bit on this GPU";
    EXPECT_EQ(overlapped.has_optimizer, !graph);  // in the graph: nothing after the replay
    ASSERT_EQ(overlapped.losses.size(), sequential.losses.size());
    for (size_t i = 0; i < sequential.losses.size(); ++i) {
      if (repeats) {
        EXPECT_EQ(overlapped.losses[i], sequential.losses[i]) << "step " << i;
      } else {
        EXPECT_NEAR(overlapped.losses[i], sequential.losses[i], 1e-4 * sequential.losses[i]);
      }
    }
    EXPECT_LT(overlapped.losses.back(), overlapped.losses.front() - 1e-3);  // it trained
    for (size_t i = 0; i < sequential.params.size(); ++i) {
      const torch::Tensor& a = sequential.params[i];
      const torch::Tensor& b = overlapped.params[i];
      const double diff = (a - b).abs().max().item<double>();
      if (repeats) {
        EXPECT_TRUE(torch::equal(a, b)) << "parameter " << i << ": max |diff| " << diff;
      } else {
        EXPECT_LT(diff, 1e-5) << "parameter " << i;
      }
    }
    EXPECT_EQ(overlapped.steps, sequential.steps);
    ASSERT_FALSE(overlapped.steps.empty());
    EXPECT_EQ(overlapped.steps.front(), 8);
  }
  // Refused inside a graph without weight copies (fp32 weights: torch's
  // kernel, whose ε the host computes per step).
  auto fp32 = Spec(v1::BENCHMARK_MODE_TRAIN_STEP, v1::PRECISION_BF16, 3, 2);
  fp32.set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
  fp32.set_cuda_graph(true);
  fp32.set_optimizer_overlap(true);
  v1::JobSpec job;
  *job.mutable_benchmark() = fp32;
  EXPECT_EQ(ResolveJobSpec(job).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace benchd::worker
