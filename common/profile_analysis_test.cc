#include "common/profile_analysis.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace benchd {
namespace {

using Kind = ProfileEvent::Kind;
using ::testing::DoubleNear;
using ::testing::ElementsAre;

// Builds trees the way worker/profile_run.cc flattens Kineto's: times in ns.
class Tree {
 public:
  int Add(Kind kind, const std::string& name, int64_t start, int64_t end, int parent = -1,
          uint64_t thread = 1) {
    ProfileEvent e;
    e.kind = kind;
    e.name = name;
    e.start_ns = start;
    e.end_ns = end;
    e.parent = parent;
    e.thread = thread;
    events.push_back(e);
    return static_cast<int>(events.size()) - 1;
  }
  // An operator launching one kernel: op [s, s+10], runtime [s+2, s+8],
  // kernel [ks, ke] on the device.
  int Launch(const std::string& op, const std::string& kernel, int64_t s, int64_t ks, int64_t ke,
             int parent, uint64_t thread = 1) {
    const int o = Add(Kind::kOperator, op, s, s + 10, parent, thread);
    const int r = Add(Kind::kRuntime, "cudaLaunchKernel", s + 2, s + 8, o, thread);
    return Add(Kind::kDevice, kernel, ks, ke, r, 0);
  }
  std::vector<ProfileEvent> events;
};

const v1::ProfileRange& Range(const ProfileAnalysis& a, const std::string& name) {
  for (const auto& r : a.ranges) {
    if (r.name() == name) return r;
  }
  ADD_FAILURE() << "no range " << name;
  static v1::ProfileRange none;
  return none;
}

std::vector<std::string> RangeNames(const ProfileAnalysis& a) {
  std::vector<std::string> names;
  for (const auto& r : a.ranges) names.push_back(r.name());
  return names;
}

TEST(ProfileAnalysis, KernelsBelongToTheirRangeAndEveryRangeAroundIt) {
  Tree t;
  const int step = t.Add(Kind::kRange, "step", 0, 10000);
  const int fwd = t.Add(Kind::kRange, "forward", 100, 1000, step);
  const int attn = t.Add(Kind::kRange, "attention", 200, 400, fwd);
  const int sm = t.Add(Kind::kRange, "attention.softmax", 250, 300, attn);
  t.Launch("aten::mm", "void cutlass_kernel<float>(Params)", 110, 1000, 3000, fwd);
  t.Launch("aten::exp", "void exp_kernel<float>(int)", 260, 3000, 3500, sm);
  t.Launch("aten::exp", "void exp_kernel<float>(int)", 270, 3500, 4500, sm);

  ProfileAnalysisInput in;
  in.events = t.events;
  in.steps = 1;
  const ProfileAnalysis a = AnalyzeProfile(in);
  EXPECT_THAT(RangeNames(a), ElementsAre("step", "forward", "attention", "attention.softmax"));
  EXPECT_EQ(a.unattributed_kernels, 0);

  const v1::ProfileRange& f = Range(a, "forward");
  EXPECT_EQ(f.parent(), "step");
  EXPECT_EQ(f.kernel_count(), 3);
  EXPECT_NEAR(f.kernel_seconds(), 3500e-9, 1e-15);
  EXPECT_NEAR(f.gemm_seconds(), 2000e-9, 1e-15);  // aten::mm's kernel, by its operator
  ASSERT_EQ(f.kernels_size(), 2);
  EXPECT_EQ(f.kernels(0).name(), "void cutlass_kernel<float>(Params)");  // largest first
  EXPECT_TRUE(f.kernels(0).gemm());
  EXPECT_EQ(f.kernels(0).launched_by(), "aten::mm");
  const v1::KernelRow& exp = f.kernels(1);
  EXPECT_FALSE(exp.gemm());
  EXPECT_EQ(exp.instances(), 2);
  EXPECT_NEAR(exp.total_seconds(), 1500e-9, 1e-15);
  EXPECT_NEAR(exp.min_seconds(), 500e-9, 1e-15);
  EXPECT_NEAR(exp.max_seconds(), 1000e-9, 1e-15);
  EXPECT_NEAR(exp.med_seconds(), 750e-9, 1e-15);
  EXPECT_NEAR(exp.stddev_seconds(), 353.5534e-9, 1e-13);
  EXPECT_NEAR(f.kernels(0).time_percent() + exp.time_percent(), 100.0, 1e-9);

  // Device time of the forward range: from its host start (nothing queued
  // before it) to its last kernel's end, which the host range ended long before.
  EXPECT_NEAR(f.wall_seconds(), (4500 - 100) * 1e-9, 1e-15);
  EXPECT_NEAR(f.idle_seconds(), (4400 - 3500) * 1e-9, 1e-15);
  // The softmax range on the device starts when the work queued before it
  // (the matmul) ends, at 3000, not at its host start 250.
  const v1::ProfileRange& s = Range(a, "attention.softmax");
  EXPECT_NEAR(s.wall_seconds(), 1500e-9, 1e-15);
  EXPECT_NEAR(s.idle_seconds(), 0, 1e-15);
  EXPECT_EQ(s.parent(), "attention");
}

TEST(ProfileAnalysis, BackwardOnTheAutogradThreadBelongsToTheRangeOpenOnTheJobThread) {
  Tree t;
  const int step = t.Add(Kind::kRange, "step", 0, 10000);
  t.Add(Kind::kRange, "forward", 10, 100, step);
  const int bwd = t.Add(Kind::kRange, "backward", 200, 900, step);
  // The engine's thread (2): a root autograd function with an operator inside.
  const int fn = t.Add(Kind::kOperator, "autograd::engine::evaluate_function: MmBackward0", 300,
                       400, -1, /*thread=*/2);
  const int mm = t.Launch("aten::mm", "nvjet_tst_128x64", 310, 1000, 2000, fn, 2);
  (void)mm;
  (void)bwd;
  // A kernel without a link to its launch holds no range.
  t.Add(Kind::kDevice, "orphan_kernel", 5000, 5100);

  ProfileAnalysisInput in;
  in.events = t.events;
  const ProfileAnalysis a = AnalyzeProfile(in);
  const v1::ProfileRange& b = Range(a, "backward");
  ASSERT_EQ(b.kernels_size(), 1);
  EXPECT_EQ(b.kernels(0).name(), "nvjet_tst_128x64");
  EXPECT_TRUE(b.kernels(0).gemm());
  EXPECT_NEAR(b.gemm_fraction(), 1.0, 1e-12);
  EXPECT_EQ(Range(a, "forward").kernels_size(), 0);
  EXPECT_EQ(Range(a, "step").kernel_count(), 1);
  EXPECT_EQ(a.unattributed_kernels, 1);
  EXPECT_NEAR(a.unattributed_kernel_seconds, 100e-9, 1e-15);
}

TEST(ProfileAnalysis, RangesInTheOrderTheyFirstOpen) {
  Tree t;
  const int step = t.Add(Kind::kRange, "step", 0, 1000);
  t.Add(Kind::kRange, "scores", 10, 20, step);  // no kernels of its own
  const int mask = t.Add(Kind::kRange, "mask", 30, 40, step);
  t.Launch("aten::where", "where_kernel", 31, 100, 200, mask);
  t.Add(Kind::kRange, "scores", 50, 60, step);
  ProfileAnalysisInput in;
  in.events = t.events;
  EXPECT_THAT(RangeNames(AnalyzeProfile(in)), ElementsAre("step", "scores", "mask"));
}

TEST(ProfileAnalysis, LinksAcrossThreadsGiveWayToTimes) {
  // As Kineto 2.11 builds the tree: the engine thread's functions of both
  // steps hang under step 1's backward range.
  Tree t;
  const int step1 = t.Add(Kind::kRange, "step", 0, 1000);
  const int bwd1 = t.Add(Kind::kRange, "backward", 100, 900, step1);
  const int step2 = t.Add(Kind::kRange, "step", 2000, 3000);
  t.Add(Kind::kRange, "backward", 2100, 2900, step2);
  const int fn1 = t.Add(Kind::kOperator, "MmBackward0", 200, 300, bwd1, /*thread=*/2);
  t.Launch("aten::mm", "gemm_1", 210, 400, 500, fn1, 2);
  const int fn2 = t.Add(Kind::kOperator, "MmBackward0", 2200, 2300, bwd1, /*thread=*/2);
  t.Launch("aten::mm", "gemm_2", 2210, 2400, 2500, fn2, 2);
  ProfileAnalysisInput in;
  in.events = t.events;
  in.steps = 2;
  in.device_rows = false;  // operators' self times: cross-thread children are not subtracted
  const ProfileAnalysis cpu = AnalyzeProfile(in);
  EXPECT_NEAR(Range(cpu, "backward").wall_seconds(), 1600e-9, 1e-15);
  in.device_rows = true;
  const ProfileAnalysis a = AnalyzeProfile(in);
  const v1::ProfileRange& b = Range(a, "backward");
  EXPECT_EQ(b.kernel_count(), 2);
  EXPECT_NEAR(b.wall_seconds(), 1600e-9, 1e-15);  // not 100..2500 for step 1
  EXPECT_NEAR(Range(a, "step").wall_seconds(), 2000e-9, 1e-15);
}

TEST(ProfileAnalysis, RangesOpeningTogetherOnTwoThreadsDoNotAdoptEachOther) {
  // Found by fuzz/profile_analysis_fuzzer (it hung): two root ranges on two
  // threads opening in the same nanosecond each contained the other's start,
  // so walking out from a kernel's range never ended.
  Tree t;
  const int a = t.Add(Kind::kRange, "a", 100, 900, -1, /*thread=*/1);
  const int b = t.Add(Kind::kRange, "b", 100, 900, -1, /*thread=*/2);
  t.Launch("aten::mm", "gemm_a", 110, 200, 300, a, 1);
  t.Launch("aten::add", "add_b", 120, 400, 500, b, 2);
  ProfileAnalysisInput in;
  in.events = t.events;
  const ProfileAnalysis out = AnalyzeProfile(in);
  EXPECT_THAT(RangeNames(out), ElementsAre("a", "b"));
  EXPECT_EQ(Range(out, "a").parent(), "");  // listed first: the outer one
  EXPECT_EQ(Range(out, "b").parent(), "a");
  EXPECT_EQ(Range(out, "a").kernel_count(), 2);
  EXPECT_EQ(Range(out, "b").kernel_count(), 1);
  in.device_rows = false;
  EXPECT_EQ(AnalyzeProfile(in).ranges.size(), 2u);
}

TEST(ProfileAnalysis, GemmByNameWhenNoOperatorLaunchedIt) {
  EXPECT_TRUE(LooksLikeGemmKernel("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32"));
  EXPECT_TRUE(LooksLikeGemmKernel("ampere_sgemm_128x64_tn"));
  EXPECT_TRUE(LooksLikeGemmKernel("nvjet_tst_192x192_64x4_1x2_h_bz_coopB_NTN"));
  EXPECT_FALSE(LooksLikeGemmKernel("void pytorch_flash::flash_fwd_kernel<...>"));
  EXPECT_FALSE(LooksLikeGemmKernel("void at::native::vectorized_elementwise_kernel<4>"));
  EXPECT_TRUE(IsMatmulOperator("aten::bmm"));
  EXPECT_FALSE(IsMatmulOperator("aten::matmul"));  // dispatches to mm/bmm, which are counted
}

TEST(ProfileAnalysis, PerStepFiguresDivideByTheProfiledSteps) {
  Tree t;
  for (int s = 0; s < 3; ++s) {
    const int64_t base = s * 100000;
    const int step = t.Add(Kind::kRange, "step", base, base + 50000);
    const int fwd = t.Add(Kind::kRange, "forward", base + 10, base + 100, step);
    t.Launch("aten::addmm", "gemm_a", base + 20, base + 1000, base + 3000, fwd);
  }
  ProfileAnalysisInput in;
  in.events = t.events;
  in.steps = 3;
  in.flops_per_step = {{"forward", 4e6}};
  const ProfileAnalysis a = AnalyzeProfile(in);
  const v1::ProfileRange& f = Range(a, "forward");
  EXPECT_EQ(f.instances(), 3);
  EXPECT_NEAR(f.kernel_seconds_per_step(), 2000e-9, 1e-15);
  EXPECT_NEAR(f.kernels(0).instances_per_step(), 1.0, 1e-12);
  EXPECT_NEAR(f.kernels(0).total_seconds_per_step(), 2000e-9, 1e-15);
  EXPECT_DOUBLE_EQ(f.flops_per_step(), 4e6);
  EXPECT_NEAR(f.kernel_flops_per_second(), 4e6 / 2000e-9, 1);
  EXPECT_EQ(Range(a, "step").flops_per_step(), 0);
  // The step's device time runs from its start to its host end (the
  // synchronize), the kernels having finished inside it.
  EXPECT_NEAR(Range(a, "step").wall_seconds_per_step(), 50000e-9, 1e-15);
}

TEST(ProfileAnalysis, CpuRowsAreOperatorSelfTimesThatAddUpToTheRange) {
  Tree t;
  const int step = t.Add(Kind::kRange, "step", 0, 1000);
  const int fwd = t.Add(Kind::kRange, "forward", 0, 900, step);
  const int linear = t.Add(Kind::kOperator, "aten::linear", 100, 600, fwd);
  t.Add(Kind::kOperator, "aten::t", 110, 150, linear);
  t.Add(Kind::kOperator, "aten::mm", 150, 550, linear);
  t.Add(Kind::kOperator, "aten::add", 600, 800, fwd);

  ProfileAnalysisInput in;
  in.events = t.events;
  in.device_rows = false;
  const ProfileAnalysis a = AnalyzeProfile(in);
  const v1::ProfileRange& f = Range(a, "forward");
  ASSERT_EQ(f.kernels_size(), 4);
  EXPECT_EQ(f.kernels(0).name(), "aten::mm");
  EXPECT_NEAR(f.kernels(0).total_seconds(), 400e-9, 1e-15);
  EXPECT_TRUE(f.kernels(0).gemm());
  EXPECT_EQ(f.kernels(0).launched_by(), "aten::linear");
  EXPECT_EQ(f.kernels(1).name(), "aten::add");
  // aten::linear's self time: 500 less its children's 440.
  EXPECT_EQ(f.kernels(2).name(), "aten::linear");
  EXPECT_NEAR(f.kernels(2).total_seconds(), 60e-9, 1e-15);
  EXPECT_NEAR(f.kernel_seconds(), 700e-9, 1e-15);  // 500 + 200: every operator's time once
  EXPECT_NEAR(f.wall_seconds(), 900e-9, 1e-15);    // host time on a CPU
  EXPECT_NEAR(f.idle_seconds(), 200e-9, 1e-15);    // in the range, outside every operator
  double percent = 0;
  for (const auto& k : f.kernels()) percent += k.time_percent();
  EXPECT_NEAR(percent, 100.0, 1e-9);
  EXPECT_NEAR(f.gemm_fraction(), 400.0 / 700.0, 1e-12);
}

TEST(ProfileAnalysis, ShortNamesElideTemplatesAndParameters) {
  const std::string name =
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
      "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)";
  EXPECT_EQ(ShortKernelName(name, 60), "void at::native::vectorized_elementwise_kernel<...>(...)");
  EXPECT_EQ(ShortKernelName("short", 60), "short");
  EXPECT_EQ(ShortKernelName(name, 20), "void at::native::...");
  EXPECT_EQ(ShortKernelName("aten::mm", 60), "aten::mm");
}

}  // namespace
}  // namespace benchd
