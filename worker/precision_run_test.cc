// The precision request on the CPU: the write-up's accumulation figures and
// the ToyModel's dtypes as CPU autocast really gives them.
#include "worker/precision_run.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "common/job_spec.h"

namespace benchd::worker {
namespace {

v1::PrecisionSpec ResolvedPrecision(const v1::PrecisionSpec& in) {
  v1::JobSpec job;
  *job.mutable_precision() = in;
  auto resolved = ResolveJobSpec(job);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  return resolved->precision();
}

// tensor name -> dtype, of one autocast run.
std::map<std::string, std::string> Dtypes(const v1::PrecisionAutocastRun& run) {
  std::map<std::string, std::string> out;
  for (const v1::PrecisionTensorDtype& t : run.tensors()) out[t.tensor()] = t.dtype();
  return out;
}

class PrecisionRunTest : public ::testing::Test {
 protected:
  WorkerDevice cpu_ = *ParseWorkerDevice("cpu:0");
};

TEST_F(PrecisionRunTest, TheDefaultRequestGivesTheWriteUpsFigures) {
  const v1::PrecisionSpec spec = ResolvedPrecision({});
  std::vector<std::string> lines;
  PrecisionHooks hooks;
  hooks.log = [&](const std::string& line) { lines.push_back(line); };
  auto r = RunPrecision(spec, cpu_, hooks);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec().DebugString(), spec.DebugString());
  EXPECT_EQ(r->device(), "cpu:0");
  EXPECT_FALSE(r->device_name().empty());
  EXPECT_FALSE(r->versions().torch().empty());
  EXPECT_EQ(lines.size(), 6u);  // a line per row: 4 loops, 2 autocast runs

  ASSERT_EQ(r->accumulation_size(), 4);
  const v1::PrecisionAccumulationRow& fp32 = r->accumulation(0);
  const v1::PrecisionAccumulationRow& fp16 = r->accumulation(1);
  const v1::PrecisionAccumulationRow& mixed = r->accumulation(2);
  const v1::PrecisionAccumulationRow& cast = r->accumulation(3);
  EXPECT_EQ(fp32.name(), "fp32");
  EXPECT_EQ(fp32.accumulator_dtype(), "float32");
  EXPECT_EQ(fp32.addend_dtype(), "float32");
  EXPECT_EQ(fp16.accumulator_dtype(), "float16");
  EXPECT_EQ(fp16.addend_dtype(), "float16");
  EXPECT_EQ(mixed.accumulator_dtype(), "float32");
  EXPECT_EQ(mixed.addend_dtype(), "float16");
  EXPECT_FALSE(mixed.addend_cast());
  EXPECT_EQ(cast.name(), "mixed_cast");
  EXPECT_TRUE(cast.addend_cast());
  for (const auto& row : r->accumulation()) {
    EXPECT_DOUBLE_EQ(row.exact(), 10.0) << row.name();
    EXPECT_DOUBLE_EQ(row.absolute_error(), std::abs(row.result() - 10.0)) << row.name();
    EXPECT_DOUBLE_EQ(row.relative_error(), row.absolute_error() / 10.0) << row.name();
  }
  // The write-up's values: tensor(10.0001), tensor(9.9531, dtype=torch.float16),
  // tensor(10.0021), tensor(10.0021); exactly what PyTorch 2.11 prints.
  EXPECT_DOUBLE_EQ(fp32.result(), 10.000133514404297);
  EXPECT_LT(fp32.absolute_error(), 1e-3);
  EXPECT_DOUBLE_EQ(fp16.result(), 9.953125);  // visibly wrong: fp16's step near 10 is 1/128
  EXPECT_GT(fp16.absolute_error(), 0.04);
  EXPECT_DOUBLE_EQ(mixed.result(), 10.00213623046875);
  EXPECT_DOUBLE_EQ(cast.result(), mixed.result());  // the add promotes: the same loop
  EXPECT_DOUBLE_EQ(fp16.addend_value(), 0.01000213623046875);
  EXPECT_DOUBLE_EQ(mixed.addend_value(), 0.01000213623046875);
  EXPECT_DOUBLE_EQ(fp32.addend_value(), static_cast<double>(0.01f));

  // CPU autocast as torch 2.11 has it (checked in Python: torch.autocast("cpu")):
  // parameters stay fp32; the linears, ReLU and (unlike CUDA autocast) the
  // layer norm run in the autocast dtype; cross-entropy in fp32; fp32 gradients.
  ASSERT_EQ(r->autocast_size(), 2);
  const std::map<v1::Precision, std::string> low = {{v1::PRECISION_BF16, "bfloat16"},
                                                    {v1::PRECISION_FP16, "float16"}};
  EXPECT_EQ(r->autocast(0).autocast_dtype(), v1::PRECISION_BF16);
  EXPECT_EQ(r->autocast(1).autocast_dtype(), v1::PRECISION_FP16);
  for (const v1::PrecisionAutocastRun& run : r->autocast()) {
    SCOPED_TRACE(run.autocast_dtype());
    EXPECT_EQ(run.autocast_device_type(), "cpu");
    const std::string l = low.at(run.autocast_dtype());
    const std::map<std::string, std::string> want = {{"fc1.weight", "float32"},
                                                     {"ln.weight", "float32"},
                                                     {"ln.bias", "float32"},
                                                     {"fc2.weight", "float32"},
                                                     {"fc1", l},
                                                     {"relu", l},
                                                     {"ln", l},
                                                     {"fc2", l},
                                                     {"loss", "float32"},
                                                     {"fc1.weight.grad", "float32"},
                                                     {"ln.weight.grad", "float32"},
                                                     {"ln.bias.grad", "float32"},
                                                     {"fc2.weight.grad", "float32"}};
    EXPECT_EQ(Dtypes(run), want);
    ASSERT_EQ(run.tensors_size(), 13);
    EXPECT_EQ(run.tensors(0).tensor(), "fc1.weight");
    EXPECT_EQ(run.tensors(0).role(), "parameter");
    EXPECT_EQ(run.tensors(4).tensor(), "fc1");
    EXPECT_EQ(run.tensors(4).role(), "activation");
    EXPECT_EQ(run.tensors(7).role(), "logits");
    EXPECT_EQ(run.tensors(8).role(), "loss");
    EXPECT_EQ(run.tensors(12).tensor(), "fc2.weight.grad");
    EXPECT_EQ(run.tensors(12).role(), "gradient");
    // Cross-entropy of 5 classes from a fresh model: near ln 5.
    EXPECT_GT(run.loss(), 0.5);
    EXPECT_LT(run.loss(), 4);
  }
}

TEST_F(PrecisionRunTest, CountAddendAndExperimentsAreHonoured) {
  v1::PrecisionSpec in;
  in.add_experiments(v1::PRECISION_EXPERIMENT_ACCUMULATION);
  in.set_count(10);
  in.set_addend(0.5);  // exact in every dtype
  auto r = RunPrecision(ResolvedPrecision(in), cpu_);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->autocast_size(), 0);
  ASSERT_EQ(r->accumulation_size(), 4);
  for (const auto& row : r->accumulation()) {
    EXPECT_DOUBLE_EQ(row.result(), 5.0) << row.name();
    EXPECT_DOUBLE_EQ(row.absolute_error(), 0) << row.name();
  }

  v1::PrecisionSpec autocast;
  autocast.add_experiments(v1::PRECISION_EXPERIMENT_AUTOCAST);
  autocast.add_autocast_dtypes(v1::PRECISION_FP16);
  autocast.set_seed(3);
  auto a = RunPrecision(ResolvedPrecision(autocast), cpu_);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->accumulation_size(), 0);
  ASSERT_EQ(a->autocast_size(), 1);
  EXPECT_EQ(a->autocast(0).autocast_dtype(), v1::PRECISION_FP16);
  // The seed names the model and batch: the same loss again.
  auto again = RunPrecision(ResolvedPrecision(autocast), cpu_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->autocast(0).loss(), a->autocast(0).loss());
}

TEST_F(PrecisionRunTest, CancelledBetweenRows) {
  PrecisionHooks hooks;
  hooks.cancelled = [] { return true; };
  auto r = RunPrecision(ResolvedPrecision({}), cpu_, hooks);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
}

TEST_F(PrecisionRunTest, TorchDtypeNames) {
  EXPECT_EQ(TorchDtypeName(at::kFloat), "float32");
  EXPECT_EQ(TorchDtypeName(at::kHalf), "float16");
  EXPECT_EQ(TorchDtypeName(at::kBFloat16), "bfloat16");
  EXPECT_EQ(TorchDtypeName(at::kDouble), "float64");
  EXPECT_EQ(TorchDtypeName(at::kLong), "int64");
}

}  // namespace
}  // namespace benchd::worker
