#include "common/sweep_table.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace benchd {
namespace {

v1::SweepSpec Axes() {
  v1::SweepSpec sweep;
  auto* m = sweep.add_axes();
  m->set_field("model.preset");
  m->add_values("small");
  m->add_values("medium");
  auto* p = sweep.add_axes();
  p->set_field("precision");
  p->add_values("fp32");
  p->add_values("bf16");
  return sweep;
}

v1::Stats Stats(double mean, double median) {
  v1::Stats s;
  s.set_count(10);
  s.set_mean(mean);
  s.set_median(median);
  return s;
}

// A train_step cell whose step takes `median` (mean 10 ms: 4 forward, 5
// backward, 1 optimizer).
v1::SweepCell Ok(std::vector<std::string> values, double median) {
  v1::SweepCell c;
  for (auto& v : values) c.add_values(v);
  c.set_outcome(v1::SWEEP_CELL_OUTCOME_OK);
  v1::BenchmarkResult* b = c.mutable_result()->mutable_benchmark();
  b->mutable_spec()->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  *b->mutable_step() = Stats(0.010, median);
  *b->mutable_forward() = Stats(0.004, 0.004);
  *b->mutable_backward() = Stats(0.005, 0.005);
  *b->mutable_optimizer() = Stats(0.001, 0.001);
  b->set_tokens_per_second(512 / median);
  b->set_peak_memory_bytes(3 << 20);
  return c;
}

v1::SweepCell Oom(std::vector<std::string> values) {
  v1::SweepCell c;
  for (auto& v : values) c.add_values(v);
  c.set_outcome(v1::SWEEP_CELL_OUTCOME_OUT_OF_MEMORY);
  c.set_error_code(8);
  return c;
}

TEST(SweepTableTest, DerivedColumnsSpeedupSharesTokensAndCounts) {
  v1::SweepResult r;
  *r.add_cells() = Ok({"small", "fp32"}, 0.010);
  *r.add_cells() = Ok({"small", "bf16"}, 0.004);
  *r.add_cells() = Oom({"medium", "fp32"});
  *r.add_cells() = Ok({"medium", "bf16"}, 0.020);
  DeriveSweepColumns(Axes(), &r);
  EXPECT_EQ(r.fields_size(), 2);
  EXPECT_EQ(r.fields(1), "precision");
  EXPECT_EQ(r.cells_ok(), 3);
  EXPECT_EQ(r.cells_out_of_memory(), 1);
  EXPECT_EQ(r.cells_timeout(), 0);
  EXPECT_EQ(r.cells_failed(), 0);
  const v1::SweepCell& fp32 = r.cells(0);
  EXPECT_DOUBLE_EQ(fp32.speedup_vs_fp32(), 1.0);
  EXPECT_DOUBLE_EQ(r.cells(1).speedup_vs_fp32(), 2.5);  // 10 ms / 4 ms
  EXPECT_DOUBLE_EQ(r.cells(1).median_step_seconds(), 0.004);
  EXPECT_DOUBLE_EQ(r.cells(1).tokens_per_second(), 512 / 0.004);
  EXPECT_DOUBLE_EQ(fp32.forward_share(), 0.4);
  EXPECT_DOUBLE_EQ(fp32.backward_share(), 0.5);
  EXPECT_DOUBLE_EQ(fp32.optimizer_share(), 0.1);
  // No fp32 partner (it ran out of memory): no speed-up; the OOM row has none.
  EXPECT_FALSE(r.cells(3).has_speedup_vs_fp32());
  EXPECT_TRUE(r.cells(3).has_median_step_seconds());
  EXPECT_FALSE(r.cells(2).has_median_step_seconds());
  EXPECT_FALSE(r.cells(2).has_forward_share());
}

TEST(SweepTableTest, NoPrecisionAxisNoSpeedupAndForwardHasOnlyTheForwardShare) {
  v1::SweepSpec sweep;
  sweep.add_axes()->set_field("context_length");
  v1::SweepResult r;
  *r.add_cells() = Ok({"128"}, 0.01);
  r.mutable_cells(0)->mutable_result()->mutable_benchmark()->mutable_spec()->set_mode(
      v1::BENCHMARK_MODE_FORWARD);
  DeriveSweepColumns(sweep, &r);
  EXPECT_FALSE(r.cells(0).has_speedup_vs_fp32());
  EXPECT_TRUE(r.cells(0).has_forward_share());
  EXPECT_FALSE(r.cells(0).has_backward_share());
  EXPECT_FALSE(r.cells(0).has_optimizer_share());
}

TEST(SweepTableTest, APivotIsTheWriteUpsLayoutWithOutcomesWhereNoValue) {
  v1::SweepResult r;
  *r.add_cells() = Ok({"small", "fp32"}, 0.010);
  *r.add_cells() = Ok({"small", "bf16"}, 0.004);
  *r.add_cells() = Oom({"medium", "fp32"});
  *r.add_cells() = Ok({"medium", "bf16"}, 0.020);
  DeriveSweepColumns(Axes(), &r);
  auto p = PivotSweep(Axes(), r, "model.preset", "precision", "median_step_ms");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->row_labels, (std::vector<std::string>{"small", "medium"}));
  EXPECT_EQ(p->column_labels, (std::vector<std::string>{"fp32", "bf16"}));
  EXPECT_DOUBLE_EQ(*p->entries[0][1].value, 4.0);
  EXPECT_EQ(p->entries[1][0].outcome, v1::SWEEP_CELL_OUTCOME_OUT_OF_MEMORY);
  EXPECT_FALSE(p->entries[1][0].value.has_value());
  EXPECT_DOUBLE_EQ(*p->entries[1][1].value, 20.0);

  // Transposed, and a third axis folds into the row labels.
  v1::SweepSpec three = Axes();
  three.add_axes()->set_field("mode");
  v1::SweepResult r3;
  *r3.add_cells() = Ok({"small", "fp32", "forward"}, 0.01);
  *r3.add_cells() = Ok({"small", "fp32", "train_step"}, 0.03);
  DeriveSweepColumns(three, &r3);
  auto t = PivotSweep(three, r3, "precision", "model.preset", "tokens_per_second");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->row_labels,
            (std::vector<std::string>{"fp32 (mode=forward)", "fp32 (mode=train_step)"}));
  ASSERT_TRUE(t->entries[1][0].value.has_value());
  EXPECT_DOUBLE_EQ(*t->entries[1][0].value, 512 / 0.03);
}

TEST(SweepTableTest, PivotRefusalsNameWhatIsWrong) {
  v1::SweepResult r;
  EXPECT_EQ(
      PivotSweep(Axes(), r, "batch_size", "precision", "median_step_ms").status().message(),
      "pivot: 'batch_size' is not an axis of the sweep; its axes are model.preset, precision");
  EXPECT_EQ(PivotSweep(Axes(), r, "precision", "precision", "median_step_ms").status().message(),
            "pivot: rows and columns are both precision; give two different axes");
  EXPECT_EQ(PivotSweep(Axes(), r, "model.preset", "precision", "speed").status().message(),
            "unknown value column 'speed'; expected one of median_step_ms, tokens_per_second, "
            "speedup_vs_fp32, forward_share, backward_share, optimizer_share, peak_memory_mib, "
            "wall_seconds");
}

TEST(SweepTableTest, CellValuesByColumn) {
  v1::SweepCell c = Ok({"small", "fp32"}, 0.010);
  c.set_wall_seconds(2.5);
  v1::SweepResult r;
  *r.add_cells() = c;
  DeriveSweepColumns(Axes(), &r);
  EXPECT_DOUBLE_EQ(**SweepCellValue(r.cells(0), "median_step_ms"), 10.0);
  EXPECT_DOUBLE_EQ(**SweepCellValue(r.cells(0), "peak_memory_mib"), 3.0);
  EXPECT_DOUBLE_EQ(**SweepCellValue(r.cells(0), "wall_seconds"), 2.5);
  EXPECT_EQ(SweepOutcomeName(v1::SWEEP_CELL_OUTCOME_TIMEOUT), "timeout");
  EXPECT_FALSE(SweepCellValue(Oom({"a", "b"}), "median_step_ms")->has_value());
}

}  // namespace
}  // namespace benchd
