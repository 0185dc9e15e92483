#include "client/profile_view.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::KernelRow* AddKernel(v1::ProfileRange* r, const std::string& name, bool gemm, double total,
                         int64_t n) {
  v1::KernelRow* k = r->add_kernels();
  k->set_name(name);
  k->set_gemm(gemm);
  k->set_total_seconds(total);
  k->set_instances(n);
  k->set_avg_seconds(total / n);
  k->set_med_seconds(total / n);
  k->set_min_seconds(total / n);
  k->set_max_seconds(total / n);
  k->set_total_seconds_per_step(total / 2);
  return k;
}

v1::ProfileResult GpuResult() {
  v1::ProfileResult r;
  r.mutable_spec()->mutable_step()->mutable_model()->set_preset("small");
  r.mutable_spec()->mutable_step()->set_mode(v1::BENCHMARK_MODE_FORWARD);
  r.set_device("cuda:0");
  r.set_kernel_source("cuda_kernels");
  r.mutable_spec()->set_profile_steps(2);
  r.mutable_spec()->add_activities(v1::PROFILER_ACTIVITY_CPU);
  r.mutable_spec()->add_activities(v1::PROFILER_ACTIVITY_CUDA);
  r.mutable_unprofiled_step()->set_median(0.010);
  r.mutable_profiled_step()->set_median(0.0105);
  r.set_profiler_overhead(1.05);
  r.set_trace_artifact("trace.json");
  r.set_artifacts_dir("/data/artifacts/4");
  v1::ProfileRange* fwd = r.add_ranges();
  fwd->set_name("forward");
  fwd->set_instances(2);
  fwd->set_wall_seconds_per_step(0.004);
  fwd->set_kernel_seconds_per_step(0.003);
  fwd->set_idle_fraction(0.25);
  fwd->set_gemm_fraction(0.8);
  fwd->set_gemm_seconds(0.0048);
  fwd->set_kernel_count(40);
  fwd->set_flops_per_step(3e12);
  fwd->set_kernel_flops_per_second(1e15);
  const std::string long_name =
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
      "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)";
  AddKernel(fwd, "sm90_xmma_gemm_f32f32_tf32f32_f32", true, 0.0048, 20)->set_time_percent(80);
  AddKernel(fwd, long_name, false, 0.0012, 20)->set_time_percent(20);
  const char* parts[] = {"attention.scores", "attention.softmax"};
  double times[] = {0.0002, 0.0006}, flops[] = {4e9, 1e8};
  for (int i = 0; i < 2; ++i) {
    v1::ProfileRange* p = r.add_ranges();
    p->set_name(parts[i]);
    p->set_parent("attention");
    p->set_kernel_seconds_per_step(times[i]);
    p->set_flops_per_step(flops[i]);
    p->set_kernel_flops_per_second(flops[i] / times[i]);
  }
  return r;
}

TEST(ProfileView, ReportsStepTimesRangesAndKernels) {
  const std::string v = ProfileResultView(GpuResult());
  EXPECT_THAT(v, HasSubstr("unprofiled median 10.000 ms"));
  EXPECT_THAT(v, HasSubstr("profiled median 10.500 ms: x1.050"));
  EXPECT_THAT(v, HasSubstr("trace.json"));
  EXPECT_THAT(v, HasSubstr("GPU idle"));
  // The range row: wall 4 ms against 3 ms of kernels, 25% idle, 80% GEMM.
  EXPECT_THAT(v, HasSubstr("forward"));
  EXPECT_THAT(v, HasSubstr("4.000"));
  EXPECT_THAT(v, HasSubstr("25.0%"));
  EXPECT_THAT(v, HasSubstr("80.0%"));
  // Kernel names are shortened for display, whole in the data.
  EXPECT_THAT(v, HasSubstr("void at::native::vectorized_elementwise_kernel<...>(...)"));
  EXPECT_THAT(v, Not(HasSubstr("CUDAFunctor_add")));
  EXPECT_THAT(v, HasSubstr("top non-GEMM kernels"));
}

TEST(ProfileView, AttentionPartsShowTimeAgainstFlops) {
  const std::string t = AttentionPartsTable(GpuResult());
  // softmax: 75% of the parts' time for 2.4% of their FLOPs.
  EXPECT_THAT(t, HasSubstr("softmax"));
  EXPECT_THAT(t, HasSubstr("75.0%"));
  EXPECT_THAT(t, HasSubstr("2.4%"));
  EXPECT_THAT(t, HasSubstr("scores"));
  EXPECT_THAT(t, HasSubstr("97.6%"));
  v1::ProfileResult sdpa = GpuResult();
  sdpa.mutable_ranges()->DeleteSubrange(1, 2);
  EXPECT_EQ(AttentionPartsTable(sdpa), "");
}

TEST(ProfileView, TopAllAndNonGemm) {
  const v1::ProfileResult result = GpuResult();
  const v1::ProfileRange& fwd = result.ranges(0);
  ProfileViewOptions one;
  one.top = 1;
  EXPECT_THAT(KernelTable(fwd, one), HasSubstr("sm90_xmma_gemm"));
  EXPECT_THAT(KernelTable(fwd, one), Not(HasSubstr("vectorized")));
  EXPECT_THAT(KernelTable(fwd, one, /*non_gemm_only=*/true), HasSubstr("vectorized"));
  EXPECT_THAT(KernelTable(fwd, one, /*non_gemm_only=*/true), Not(HasSubstr("sm90")));
  ProfileViewOptions all;
  all.all = true;
  all.top = 1;
  EXPECT_THAT(KernelTable(fwd, all), HasSubstr("vectorized"));
}

TEST(ProfileView, SpecSummary) {
  v1::ProfileSpec p;
  p.mutable_step()->mutable_model()->set_preset("xl");
  p.mutable_step()->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  p.mutable_step()->set_precision(v1::PRECISION_BF16);
  p.mutable_step()->set_batch_size(4);
  p.mutable_step()->set_context_length(256);
  p.set_profile_steps(3);
  EXPECT_EQ(ProfileSpecSummary(p), "xl train_step bf16 batch 4 ctx 256, 3 profiled steps, default");
}

}  // namespace
}  // namespace benchd::client
