#include "client/precision_view.h"

#include "gtest/gtest.h"

namespace benchd::client {
namespace {

TEST(PrecisionViewTest, SpecFromFlags) {
  PrecisionOptions o;
  o.device = "cuda:0";
  o.experiments = "autocast, accumulation";
  o.autocast_dtypes = "fp16";
  o.count = 100;
  o.addend = 0.1;
  o.seed = 3;
  auto spec = BuildPrecisionSpec(o);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->device(), "cuda:0");
  const v1::PrecisionSpec& p = spec->precision();
  ASSERT_EQ(p.experiments_size(), 2);
  EXPECT_EQ(p.experiments(0), v1::PRECISION_EXPERIMENT_AUTOCAST);
  EXPECT_EQ(p.experiments(1), v1::PRECISION_EXPERIMENT_ACCUMULATION);
  ASSERT_EQ(p.autocast_dtypes_size(), 1);
  EXPECT_EQ(p.autocast_dtypes(0), v1::PRECISION_FP16);
  EXPECT_EQ(p.count(), 100);
  EXPECT_EQ(p.addend(), 0.1);
  EXPECT_EQ(p.seed(), 3u);
  // Unset flags stay unset: the daemon writes its defaults.
  auto bare = BuildPrecisionSpec({});
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->has_precision());
  EXPECT_EQ(bare->precision().experiments_size(), 0);
  EXPECT_FALSE(bare->precision().has_count());
  EXPECT_FALSE(bare->precision().has_addend());
}

TEST(PrecisionViewTest, BadFlagsAreNamed) {
  PrecisionOptions o;
  o.experiments = "accumulation,speed";
  auto s = BuildPrecisionSpec(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "--experiments: unknown experiment 'speed'; expected accumulation, autocast or both "
            "(accumulation,autocast)");
  o.experiments.clear();
  o.autocast_dtypes = "fp8";
  s = BuildPrecisionSpec(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "--autocast-dtypes: unknown dtype 'fp8'; expected bf16, fp16 or both (bf16,fp16)");
}

v1::PrecisionResult SamplePrecisionResult() {
  v1::PrecisionResult r;
  v1::PrecisionSpec* s = r.mutable_spec();
  s->add_experiments(v1::PRECISION_EXPERIMENT_ACCUMULATION);
  s->add_experiments(v1::PRECISION_EXPERIMENT_AUTOCAST);
  s->add_autocast_dtypes(v1::PRECISION_BF16);
  s->add_autocast_dtypes(v1::PRECISION_FP16);
  s->set_count(1000);
  s->set_addend(0.01);
  auto row = [&](const char* name, const char* acc, const char* add, bool cast, double stored,
                 double result) {
    v1::PrecisionAccumulationRow* a = r.add_accumulation();
    a->set_name(name);
    a->set_accumulator_dtype(acc);
    a->set_addend_dtype(add);
    a->set_addend_cast(cast);
    a->set_addend_value(stored);
    a->set_result(result);
    a->set_exact(10);
    a->set_absolute_error(std::abs(result - 10));
    a->set_relative_error(std::abs(result - 10) / 10);
  };
  row("fp32", "float32", "float32", false, 0.009999999776482582, 10.000133514404297);
  row("fp16", "float16", "float16", false, 0.01000213623046875, 9.953125);
  row("mixed", "float32", "float16", false, 0.01000213623046875, 10.00213623046875);
  row("mixed_cast", "float32", "float16", true, 0.01000213623046875, 10.00213623046875);
  for (auto [p, low] :
       {std::pair{v1::PRECISION_BF16, "bfloat16"}, std::pair{v1::PRECISION_FP16, "float16"}}) {
    v1::PrecisionAutocastRun* run = r.add_autocast();
    run->set_autocast_dtype(p);
    run->set_autocast_device_type("cuda");
    run->set_loss(1.6867);
    auto t = [&](const char* tensor, const char* role, const char* dtype) {
      v1::PrecisionTensorDtype* d = run->add_tensors();
      d->set_tensor(tensor);
      d->set_role(role);
      d->set_dtype(dtype);
    };
    t("fc1.weight", "parameter", "float32");
    t("fc1", "activation", low);
    t("ln", "activation", "float32");
    t("fc2", "logits", low);
    t("loss", "loss", "float32");
    t("fc1.weight.grad", "gradient", "float32");
  }
  r.set_device("cuda:0");
  r.set_device_name("NVIDIA H100");
  return r;
}

TEST(PrecisionViewTest, BothTables) {
  const std::string view = PrecisionResultView(SamplePrecisionResult());
  for (const char* want :
       {"Accumulation: 0.01 added 1000 times (exact 10)", "loop", "accumulator", "abs error",
        "rel error", "9.953125", "10.0001335", "10.0021362", "0.0100021362", "float16 -> float32",
        "Autocast (cuda autocast): the ToyModel's dtypes", "autocast bf16", "autocast fp16", "Loss",
        "bf16 1.6867, fp16 1.6867", "cuda:0 (NVIDIA H100)"}) {
    EXPECT_NE(view.find(want), std::string::npos) << want << " in\n" << view;
  }
  // A row per tensor, a column per dtype.
  EXPECT_NE(view.find("fc2              logits      bfloat16       float16\n"), std::string::npos)
      << view;
  EXPECT_NE(view.find("ln               activation  float32        float32\n"), std::string::npos)
      << view;
}

TEST(PrecisionViewTest, OneExperimentOnly) {
  v1::PrecisionResult r = SamplePrecisionResult();
  r.clear_autocast();
  std::string view = PrecisionResultView(r);
  EXPECT_EQ(view.find("Autocast"), std::string::npos) << view;
  EXPECT_NE(view.find("9.953125"), std::string::npos) << view;
  r = SamplePrecisionResult();
  r.clear_accumulation();
  view = PrecisionResultView(r);
  EXPECT_EQ(view.find("Accumulation"), std::string::npos) << view;
  EXPECT_NE(view.find("autocast fp16"), std::string::npos) << view;
}

TEST(PrecisionViewTest, Csv) {
  v1::Job job;
  job.set_id("7");
  *job.mutable_result()->mutable_precision() = SamplePrecisionResult();
  const std::string csv = PrecisionCsv(job);
  EXPECT_EQ(csv.rfind(std::string(kPrecisionAccumulationCsvHeader) + "\n", 0), 0u) << csv;
  EXPECT_NE(csv.find("\n7,fp16,float16,float16,false,0.01000213623046875,9.953125,10,"
                     "0.046875,0.0046875\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\n\n" + std::string(kPrecisionAutocastCsvHeader) + "\n"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\n7,fp16,cuda,fc2,logits,float16\n"), std::string::npos) << csv;
}

TEST(PrecisionViewTest, SpecSummary) {
  EXPECT_EQ(PrecisionSpecSummary(SamplePrecisionResult().spec()),
            "accumulation (0.01 x 1000); autocast bf16, fp16");
  v1::PrecisionSpec s;
  s.add_experiments(v1::PRECISION_EXPERIMENT_AUTOCAST);
  s.add_autocast_dtypes(v1::PRECISION_FP16);
  EXPECT_EQ(PrecisionSpecSummary(s), "autocast fp16");
}

}  // namespace
}  // namespace benchd::client
