#include "common/sweep_spec.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "common/limits.h"
#include "gtest/gtest.h"

namespace benchd {
namespace {

v1::JobSpec BenchmarkJob() {
  v1::JobSpec spec;
  spec.mutable_benchmark()->mutable_model()->set_preset("tiny");
  return spec;
}

void AddAxis(v1::JobSpec* spec, const std::string& field, std::vector<std::string> values) {
  v1::SweepAxis* a = spec->mutable_sweep()->add_axes();
  a->set_field(field);
  for (auto& v : values) a->add_values(std::move(v));
}

TEST(SweepSpecTest, TheProductRunsFirstAxisOutermostWithEveryCellResolved) {
  v1::JobSpec spec = BenchmarkJob();
  AddAxis(&spec, "precision", {"fp32", "BF16", "PRECISION_FP16"});
  AddAxis(&spec, "context_length", {"16", "32"});
  auto cells = ExpandSweep(spec);
  ASSERT_TRUE(cells.ok()) << cells.status();
  ASSERT_EQ(cells->size(), 6u);
  const std::vector<std::vector<std::string>> want = {{"fp32", "16"}, {"fp32", "32"},
                                                      {"bf16", "16"}, {"bf16", "32"},
                                                      {"fp16", "16"}, {"fp16", "32"}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ((*cells)[i].values, want[i]) << i;
    const v1::JobSpec& c = (*cells)[i].spec;
    EXPECT_FALSE(c.has_sweep());
    EXPECT_EQ(c.benchmark().context_length(), std::stoi(want[i][1]));
    // Resolved: defaults written out, the preset expanded.
    EXPECT_EQ(c.benchmark().batch_size(), 4);
    EXPECT_EQ(c.benchmark().mode(), v1::BENCHMARK_MODE_FORWARD);
    EXPECT_GT(c.benchmark().model().d_model(), 0);
  }
  EXPECT_EQ((*cells)[2].spec.benchmark().precision(), v1::PRECISION_BF16);
  EXPECT_EQ((*cells)[5].spec.benchmark().precision(), v1::PRECISION_FP16);
}

TEST(SweepSpecTest, ResolveKeepsTheSweepAsGivenAndResolvesAgainToItself) {
  v1::JobSpec spec;  // no model: each cell names its preset
  spec.mutable_benchmark()->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  AddAxis(&spec, "model.preset", {"tiny", "mini"});
  auto resolved = ResolveJobSpec(spec);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->SerializeAsString(), spec.SerializeAsString());
  auto cells = ExpandSweep(*resolved);
  ASSERT_TRUE(cells.ok());
  EXPECT_EQ((*cells)[1].spec.benchmark().model().preset(), "mini");
  EXPECT_NE((*cells)[0].spec.benchmark().model().d_model(),
            (*cells)[1].spec.benchmark().model().d_model());
}

TEST(SweepSpecTest, EnumsBoolsStringsAndNestedFieldsOfEveryKind) {
  v1::JobSpec spec = BenchmarkJob();
  AddAxis(&spec, "attention", {"faithful", "flash", "SDPA_MATH"});
  AddAxis(&spec, "mode", {"train_step"});
  AddAxis(&spec, "fused_ops", {"true", "False"});
  auto cells = ExpandSweep(spec);
  ASSERT_TRUE(cells.ok()) << cells.status();
  EXPECT_EQ((*cells)[2].values, (std::vector<std::string>{"flash", "train_step", "true"}));
  EXPECT_EQ((*cells)[5].values, (std::vector<std::string>{"math", "train_step", "false"}));
  EXPECT_EQ((*cells)[5].spec.benchmark().attention(), v1::ATTENTION_IMPL_SDPA_MATH);

  v1::JobSpec profile;
  profile.mutable_profile()->mutable_step()->mutable_model()->set_preset("tiny");
  AddAxis(&profile, "step.precision", {"fp32", "bf16"});
  auto p = ExpandSweep(profile);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)[1].spec.profile().step().precision(), v1::PRECISION_BF16);
  EXPECT_EQ((*p)[1].spec.profile().profile_steps(), kDefaultProfileSteps);  // resolved
}

absl::Status Refusal(const std::string& field, std::vector<std::string> values,
                     v1::JobSpec spec = BenchmarkJob()) {
  AddAxis(&spec, field, std::move(values));
  return ResolveJobSpec(spec).status();
}

TEST(SweepSpecTest, BadFieldsAreRefusedNamingTheAxisAndWhatIsAccepted) {
  absl::Status s = Refusal("modle.preset", {"tiny"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().substr(0, 95),
            "sweep.axes[0].field: 'modle.preset' is not a field of benchd.v1.BenchmarkSpec "
            "('modle' unknown)");
  EXPECT_NE(
      s.message().find("expected a scalar field of benchd.v1.BenchmarkSpec such as model.preset"),
      std::string::npos)
      << s;
  s = Refusal("model", {"tiny"});
  EXPECT_EQ(s.message(),
            "sweep.axes[0].field: 'model' is a message (benchd.v1.ModelConfig), not a scalar; "
            "name one of its fields, e.g. model.preset");
  v1::JobSpec profile;
  profile.mutable_profile()->mutable_step()->mutable_model()->set_preset("tiny");
  s = Refusal("activities", {"cpu"}, profile);
  EXPECT_NE(s.message().find("sweep.axes[0].field: 'activities' is a list "
                             "(benchd.v1.ProfileSpec.activities), not a scalar"),
            std::string::npos)
      << s;
  s = Refusal("precision.x", {"fp32"});
  EXPECT_NE(s.message().find("precision is a scalar and has no fields"), std::string::npos) << s;
  v1::JobSpec twice = BenchmarkJob();
  AddAxis(&twice, "precision", {"fp32"});
  s = Refusal("precision", {"bf16"}, twice);
  EXPECT_EQ(s.message(),
            "sweep.axes[1].field: precision is swept by an earlier axis too; give its values in "
            "one axis");
}

TEST(SweepSpecTest, BadValuesAreRefusedNamingTheValueWhatCameAndWhatIsAccepted) {
  EXPECT_EQ(Refusal("precision", {"fp32", "bf17"}).message(),
            "sweep.axes[0].values[1]: 'bf17' is not a value of precision (benchd.v1.Precision); "
            "expected fp32, bf16, fp16 (or the full names PRECISION_FP32, PRECISION_BF16, "
            "PRECISION_FP16)");
  EXPECT_EQ(Refusal("context_length", {"12x"}).message(),
            "sweep.axes[0].values[0]: expected an integer for context_length, got '12x'");
  EXPECT_EQ(Refusal("fused_ops", {"yes"}).message(),
            "sweep.axes[0].values[0]: expected true or false for fused_ops, got 'yes'");
  EXPECT_EQ(Refusal("model.rope_theta", {"inf"}).message(),
            "sweep.axes[0].values[0]: expected a finite number for rope_theta, got 'inf'");
  EXPECT_EQ(Refusal("seed", {"-1"}).message(),
            "sweep.axes[0].values[0]: expected a non-negative integer for seed, got '-1'");
  EXPECT_EQ(Refusal("precision", {"bf16", "BF16"}).message(),
            "sweep.axes[0].values[1]: 'BF16' (bf16) is given twice for precision; each value once");
  EXPECT_EQ(Refusal("precision", {}).message(),
            "sweep.axes[0].values: no values for precision; expected 1 to 32");
}

TEST(SweepSpecTest, ACellThatDoesNotResolveIsRefusedNamingTheCell) {
  // optimizer_impl needs train_step: the forward cell is refused.
  v1::JobSpec spec = BenchmarkJob();
  spec.mutable_benchmark()->set_optimizer_impl(v1::OPTIMIZER_IMPL_FUSED);
  AddAxis(&spec, "mode", {"train_step", "forward"});
  const absl::Status s = ResolveJobSpec(spec).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("sweep cell 1 (mode=forward): benchmark.optimizer_impl", 0), 0u) << s;
  EXPECT_EQ(
      Refusal("context_length", {"16", "0"}).message(),
      "sweep cell 1 (context_length=0): benchmark.context_length: expected 1..1048576, got 0");
  EXPECT_EQ(
      Refusal("model.preset", {"tiny", "huge"})
          .message()
          .rfind("sweep cell 1 (model.preset=huge): benchmark.model.preset: unknown preset 'huge'",
                 0),
      0u);
}

TEST(SweepSpecTest, LimitsAndWhatASweepCannotBe) {
  v1::JobSpec none = BenchmarkJob();
  none.mutable_sweep();
  EXPECT_EQ(ResolveJobSpec(none).status().message(),
            "sweep.axes: no axes; expected 1 to 6 axes, each a field and its values");
  // 32 x 32 = 1024 cells pass; a third axis of 2 is too many.
  v1::JobSpec big = BenchmarkJob();
  std::vector<std::string> contexts, batches;
  for (int i = 1; i <= 32; ++i) {
    contexts.push_back(absl::StrCat(i));
    batches.push_back(absl::StrCat(i));
  }
  AddAxis(&big, "context_length", contexts);
  AddAxis(&big, "batch_size", batches);
  auto cells = ExpandSweep(big);
  ASSERT_TRUE(cells.ok()) << cells.status();
  EXPECT_EQ(cells->size(), static_cast<size_t>(kMaxSweepCells));
  AddAxis(&big, "seed", {"1", "2"});
  EXPECT_EQ(ResolveJobSpec(big).status().message(),
            "sweep.axes: the sweep has more than 1024 cells (the product of the axes' values); at "
            "most 1024 in one request");

  v1::JobSpec timeout = BenchmarkJob();
  AddAxis(&timeout, "precision", {"fp32"});
  timeout.mutable_sweep()->set_cell_timeout_seconds(0.5);
  EXPECT_EQ(ResolveJobSpec(timeout).status().message(),
            "sweep.cell_timeout_seconds: expected 1..86400 (or unset: no limit), got 0.5");
  timeout.mutable_sweep()->set_cell_timeout_seconds(30);
  EXPECT_TRUE(ResolveJobSpec(timeout).ok());

  v1::JobSpec collective;
  collective.mutable_collective()->add_devices("cpu:0");
  collective.mutable_collective()->add_devices("cpu:1");
  AddAxis(&collective, "iters", {"1", "2"});
  const absl::Status s = ResolveJobSpec(collective).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("sweep: a collective request sweeps its own lists: "
                              "collective.sizes_bytes",
                              0),
            0u)
      << s;
}

TEST(SweepSpecTest, EachCellIsCheckedForTheDevice) {
  v1::JobSpec spec = BenchmarkJob();
  AddAxis(&spec, "attention", {"flash", "cudnn"});
  EXPECT_TRUE(ResolveJobSpec(spec).ok());
  const absl::Status s = CheckKindForDevice(spec, "cpu:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("sweep cell 1 (attention=cudnn): benchmark.attention: the cudnn SDPA "
                              "backend is a CUDA kernel",
                              0),
            0u)
      << s;
}

TEST(SweepSpecTest, CanonicalValueForBenchctl) {
  auto v = CanonicalSweepValue(v1::JobSpec::kBenchmark, "mode", "BENCHMARK_MODE_TRAIN_STEP", "x");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "train_step");
  EXPECT_EQ(CanonicalSweepValue(v1::JobSpec::kBenchmark, "mode", "walk", "--sweep")
                .status()
                .message()
                .rfind("--sweep: 'walk' is not a value of mode", 0),
            0u);
}

}  // namespace
}  // namespace benchd
