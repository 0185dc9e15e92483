// The attention request on the CPU, small shapes: timings, FLOPs, the
// implementations agreeing, and the failure paths.
#include "worker/attention_run.h"

#include <gtest/gtest.h>

#include "common/attention_math.h"
#include "common/job_spec.h"
#include "common/stats.h"
#include "worker/host_memory_test_util.h"

namespace benchd::worker {
namespace {

v1::AttentionSpec Resolved(const v1::AttentionSpec& in) {
  v1::JobSpec job;
  *job.mutable_attention() = in;
  auto resolved = ResolveJobSpec(job);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved->attention();
}

v1::AttentionSpec Small(v1::AttentionImpl impl, bool causal) {
  v1::AttentionSpec s;
  s.set_batch_size(2);
  s.set_seq_len(32);
  s.set_head_dim(16);
  s.set_causal(causal);
  s.set_implementation(impl);
  s.set_warmup_passes(1);
  s.set_passes(3);
  s.set_seed(7);
  return Resolved(s);
}

class AttentionRunTest : public ::testing::Test {
 protected:
  WorkerDevice cpu_ = *ParseWorkerDevice("cpu:0");
};

TEST_F(AttentionRunTest, PassesAreTimedAndTheFiguresFollowTheFormulas) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    const v1::AttentionSpec spec = Small(v1::ATTENTION_IMPL_FAITHFUL, causal);
    std::vector<int64_t> seen;
    AttentionHooks hooks;
    hooks.on_step = [&](const v1::StepTiming& t, int64_t total) {
      EXPECT_EQ(total, 4);
      seen.push_back(t.index());
    };
    auto r = RunAttention(spec, cpu_, hooks);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3}));
    ASSERT_EQ(r->passes_size(), 4);
    EXPECT_TRUE(r->passes(0).warmup());
    for (const v1::StepTiming& t : r->passes()) {
      EXPECT_GT(t.forward_seconds(), 0);
      EXPECT_GT(t.backward_seconds(), 0);
      EXPECT_DOUBLE_EQ(t.step_seconds(), t.forward_seconds() + t.backward_seconds());
      EXPECT_GE(t.host_seconds(), t.step_seconds());
    }
    EXPECT_EQ(r->forward().count(), 3);
    EXPECT_EQ(r->backward().count(), 3);
    EXPECT_GT(r->forward().median(), 0);
    EXPECT_EQ(r->timer(), "host_steady_clock");
    // 4·B·T²·d, and twice that backward, exactly.
    EXPECT_DOUBLE_EQ(r->forward_flops(), 4.0 * 2 * 32 * 32 * 16);
    EXPECT_DOUBLE_EQ(r->backward_flops(), 2 * r->forward_flops());
    EXPECT_DOUBLE_EQ(r->forward_tflops_per_second(),
                     r->forward_flops() / r->forward().median() / 1e12);
    EXPECT_DOUBLE_EQ(r->backward_tflops_per_second(),
                     r->backward_flops() / r->backward().median() / 1e12);
    // Forward + backward, and FlashAttention's count: causal halves the
    // forward, the backward is 2.5x it.
    EXPECT_EQ(r->step().count(), 3);
    std::vector<double> steps;
    for (int i = 1; i < 4; ++i) steps.push_back(r->passes(i).step_seconds());
    EXPECT_DOUBLE_EQ(r->step().median(), ComputeStats(steps).median());
    EXPECT_DOUBLE_EQ(r->flash_forward_flops(), r->forward_flops() * (causal ? 0.5 : 1.0));
    EXPECT_DOUBLE_EQ(r->flash_backward_flops(), 2.5 * r->flash_forward_flops());
    EXPECT_DOUBLE_EQ(
        r->flash_step_tflops_per_second(),
        (r->flash_forward_flops() + r->flash_backward_flops()) / r->step().median() / 1e12);
    EXPECT_EQ(r->score_matrix_bytes(), 2 * 32 * 32 * 4);
    EXPECT_EQ(r->saved_score_matrices(), 2);
    EXPECT_EQ(r->saved_by_formula_bytes(), AttentionSavedByFormula(spec).bytes);
    // A CPU has no allocator to ask: said, not invented.
    EXPECT_EQ(r->memory_source(), "unavailable on cpu");
    EXPECT_EQ(r->saved_activation_bytes(), 0);
    EXPECT_EQ(r->peak_pass_bytes(), 0);
    EXPECT_EQ(r->spec().DebugString(), spec.DebugString());
    EXPECT_EQ(r->device(), "cpu:0");
    EXPECT_FALSE(r->versions().torch().empty());
  }
}

// The course's attention and SDPA's math and (CPU) flash kernels compute the
// same function: outputs and the gradients of Q, K and V agree.
TEST_F(AttentionRunTest, FaithfulAndSdpaAgreeForwardAndBackward) {
  for (bool causal : {false, true}) {
    for (bool heads : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "causal " << causal << " heads " << heads);
      const std::vector<int64_t> dims =
          heads ? std::vector<int64_t>{2, 3, 24, 8} : std::vector<int64_t>{2, 24, 8};
      torch::manual_seed(3);
      const torch::Tensor q0 = torch::randn(dims), k0 = torch::randn(dims), v0 = torch::randn(dims),
                          g = torch::randn(dims);
      const torch::Tensor mask = causal ? CausalMask(24, torch::kCPU) : torch::Tensor();
      std::vector<std::vector<torch::Tensor>> outs;
      for (auto impl : {v1::ATTENTION_IMPL_FAITHFUL, v1::ATTENTION_IMPL_SDPA_MATH,
                        v1::ATTENTION_IMPL_SDPA_FLASH, v1::ATTENTION_IMPL_TILED}) {
        v1::AttentionSpec spec;
        spec.set_implementation(impl);
        spec.set_causal(causal);
        if (heads) spec.set_num_heads(3);
        torch::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true),
                      v = v0.clone().requires_grad_(true);
        CausalMaskCache masks;
        torch::Tensor out = AttentionForward(spec, q, k, v, mask, &masks);
        ASSERT_EQ(out.sizes(), q.sizes());
        out.backward(g);
        outs.push_back({out.detach(), q.grad(), k.grad(), v.grad()});
      }
      for (size_t i = 1; i < outs.size(); ++i) {
        for (size_t j = 0; j < 4; ++j) {
          EXPECT_TRUE(torch::allclose(outs[0][j], outs[i][j], 1e-4, 1e-5))
              << "implementation " << i << " tensor " << j << " differs by "
              << (outs[0][j] - outs[i][j]).abs().max().item<float>();
        }
      }
    }
  }
}

TEST_F(AttentionRunTest, EveryCpuImplementationAndPrecisionRuns) {
  for (auto impl :
       {v1::ATTENTION_IMPL_FAITHFUL, v1::ATTENTION_IMPL_SDPA, v1::ATTENTION_IMPL_SDPA_MATH,
        v1::ATTENTION_IMPL_SDPA_FLASH, v1::ATTENTION_IMPL_TILED}) {
    for (auto precision : {v1::PRECISION_FP32, v1::PRECISION_BF16}) {
      v1::AttentionSpec spec = Small(impl, /*causal=*/true);
      spec.set_precision(precision);
      spec.set_num_heads(2);
      SCOPED_TRACE(spec.ShortDebugString());
      auto r = RunAttention(spec, cpu_);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->score_matrix_bytes(), 2 * 2 * 32 * 32 * PrecisionBytes(precision));
      EXPECT_GT(r->backward().min(), 0);
    }
  }
}

TEST_F(AttentionRunTest, AForcedBackendThatCannotRunIsInvalidArgument) {
  // Efficient is a CUDA kernel; the daemon refuses it for a CPU at Submit
  // (CheckKindForDevice), and the run says so too if it gets that far.
  auto r = RunAttention(Small(v1::ATTENTION_IMPL_SDPA_EFFICIENT, false), cpu_);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("attention.implementation: attention efficient"),
            std::string::npos)
      << r.status();
}

TEST_F(AttentionRunTest, TheFusedKernelsOnACpuAreInvalidArgument) {
  // The daemon refuses fused for a CPU at Submit; a run that gets this far
  // says so too, naming the field, before a pass is timed.
  AttentionHooks hooks;
  int passes = 0;
  hooks.on_step = [&](const v1::StepTiming&, int64_t) { ++passes; };
  for (bool heads : {false, true}) {
    v1::AttentionSpec spec = Small(v1::ATTENTION_IMPL_FUSED, /*causal=*/true);
    if (heads) spec.set_num_heads(2);
    auto r = RunAttention(spec, cpu_, hooks);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_NE(r.status().message().find("attention.implementation: attention fused (benchd's "
                                        "FlashAttention-2 kernels) cannot run on cpu"),
              std::string::npos)
        << r.status();
    EXPECT_NE(r.status().message().find("they are CUDA kernels"), std::string::npos) << r.status();
  }
  EXPECT_EQ(passes, 0);
}

TEST_F(AttentionRunTest, CancelledBeforeAPassStops) {
  AttentionHooks hooks;
  int passes = 0;
  hooks.on_step = [&](const v1::StepTiming&, int64_t) { ++passes; };
  hooks.cancelled = [&] { return passes == 2; };
  auto r = RunAttention(Small(v1::ATTENTION_IMPL_FAITHFUL, true), cpu_, hooks);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_EQ(passes, 2);
}

TEST_F(AttentionRunTest, OutOfMemoryIsResourceExhaustedAndTheWorkerGoesOn) {
  // One 2^17 x 2^17 fp32 score matrix is 64 GiB, at the request limit; the
  // kernel refuses it before any memory is touched.
  if (!KernelRefusesAllocation(int64_t{64} << 30)) {
    GTEST_SKIP() << "this kernel's overcommit policy would grant 64 GiB";
  }
  v1::AttentionSpec big;
  big.set_batch_size(1);
  big.set_seq_len(int64_t{1} << 17);
  big.set_head_dim(16);
  big.set_passes(1);
  big.set_warmup_passes(0);
  auto r = RunAttention(Resolved(big), cpu_);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(r.status().message().find("running pass 0 of 1: faithful attention on (1, 131072, 16)"),
            std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("one score matrix is 64.00 GiB"), std::string::npos)
      << r.status();
  EXPECT_TRUE(RunAttention(Small(v1::ATTENTION_IMPL_FAITHFUL, true), cpu_).ok());
}

}  // namespace
}  // namespace benchd::worker
