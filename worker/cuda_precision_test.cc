// The precision request on the first GPU: CUDA autocast's dtypes for the
// ToyModel (the write-up's answers) and the accumulation figures on the
// device. Skipped where CUDA is not available.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "common/job_spec.h"
#include "worker/precision_run.h"

namespace benchd::worker {
namespace {

class CudaPrecisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    dev_ = *ParseWorkerDevice("cuda:0");
  }
  WorkerDevice dev_{"", torch::Device(torch::kCPU), ""};
};

TEST_F(CudaPrecisionTest, TheWriteUpsAnswersOnAGpu) {
  v1::JobSpec job;
  job.mutable_precision();
  auto spec = ResolveJobSpec(job);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto r = RunPrecision(spec->precision(), dev_);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->accumulation_size(), 4);
  EXPECT_NEAR(r->accumulation(0).result(), 10.0001, 1e-3);
  EXPECT_DOUBLE_EQ(r->accumulation(1).result(), 9.953125);
  EXPECT_DOUBLE_EQ(r->accumulation(2).result(), 10.00213623046875);
  EXPECT_DOUBLE_EQ(r->accumulation(3).result(), 10.00213623046875);

  // torch.autocast("cuda"): the linears in the autocast dtype, layer_norm and
  // cross-entropy in fp32 (CUDA's fp32 list), parameters and gradients fp32.
  ASSERT_EQ(r->autocast_size(), 2);
  for (const v1::PrecisionAutocastRun& run : r->autocast()) {
    SCOPED_TRACE(run.autocast_dtype());
    EXPECT_EQ(run.autocast_device_type(), "cuda");
    const std::string l = run.autocast_dtype() == v1::PRECISION_BF16 ? "bfloat16" : "float16";
    std::map<std::string, std::string> got;
    for (const auto& t : run.tensors()) got[t.tensor()] = t.dtype();
    const std::map<std::string, std::string> want = {{"fc1.weight", "float32"},
                                                     {"ln.weight", "float32"},
                                                     {"ln.bias", "float32"},
                                                     {"fc2.weight", "float32"},
                                                     {"fc1", l},
                                                     {"relu", l},
                                                     {"ln", "float32"},
                                                     {"fc2", l},
                                                     {"loss", "float32"},
                                                     {"fc1.weight.grad", "float32"},
                                                     {"ln.weight.grad", "float32"},
                                                     {"ln.bias.grad", "float32"},
                                                     {"fc2.weight.grad", "float32"}};
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace benchd::worker
