#include "common/sweep_table.h"

#include <set>
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

// An attention cell: forward 1 ms, backward 2 ms, their sum 3 ms (medians),
// FlashAttention's TFLOP/s, memory measured when on CUDA.
v1::SweepCell AttentionCell(std::vector<std::string> values, double forward, bool cuda) {
  v1::SweepCell c;
  for (auto& v : values) c.add_values(v);
  c.set_outcome(v1::SWEEP_CELL_OUTCOME_OK);
  c.mutable_spec()->mutable_attention()->set_seq_len(64);
  c.set_wall_seconds(1.5);
  v1::AttentionResult* a = c.mutable_result()->mutable_attention();
  *a->mutable_forward() = Stats(forward, forward);
  *a->mutable_backward() = Stats(2 * forward, 2 * forward);
  *a->mutable_step() = Stats(3 * forward, 3 * forward);
  a->set_forward_tflops_per_second(99);  // the dense count: not the sweep's
  a->set_flash_forward_tflops_per_second(1.5);
  a->set_flash_backward_tflops_per_second(2.5);
  a->set_flash_step_tflops_per_second(2.0);
  a->set_memory_source(cuda ? "cuda_caching_allocator" : "unavailable on cpu");
  a->set_saved_activation_bytes(cuda ? 4 << 20 : 0);
  a->set_peak_pass_bytes(cuda ? 8 << 20 : 0);
  a->set_score_matrix_bytes(2 << 20);
  a->set_saved_by_formula_bytes(3 << 20);
  return c;
}

TEST(SweepTableTest, AnAttentionSweepHasTheAttentionsColumns) {
  EXPECT_EQ(SweepValueColumns(v1::JobSpec::kAttention),
            (std::vector<std::string>{"median_forward_ms", "median_backward_ms", "median_step_ms",
                                      "flash_forward_tflops", "flash_backward_tflops",
                                      "flash_step_tflops", "saved_activation_mib", "peak_pass_mib",
                                      "saved_by_formula_mib", "score_matrix_mib", "wall_seconds"}));
  v1::SweepResult r;
  *r.add_cells() = AttentionCell({"64"}, 0.001, /*cuda=*/true);
  *r.add_cells() = AttentionCell({"128"}, 0.004, /*cuda=*/false);
  *r.add_cells() = Oom({"256"});
  EXPECT_EQ(SweepKind(r), v1::JobSpec::kAttention);
  const v1::SweepCell& gpu = r.cells(0);
  auto value = [](const v1::SweepCell& c, absl::string_view column) {
    return *SweepCellValue(v1::JobSpec::kAttention, c, column);
  };
  EXPECT_DOUBLE_EQ(*value(gpu, "median_forward_ms"), 1.0);
  EXPECT_DOUBLE_EQ(*value(gpu, "median_backward_ms"), 2.0);
  EXPECT_DOUBLE_EQ(*value(gpu, "median_step_ms"), 3.0);
  EXPECT_DOUBLE_EQ(*value(gpu, "flash_forward_tflops"), 1.5);
  EXPECT_DOUBLE_EQ(*value(gpu, "flash_backward_tflops"), 2.5);
  EXPECT_DOUBLE_EQ(*value(gpu, "flash_step_tflops"), 2.0);
  EXPECT_DOUBLE_EQ(*value(gpu, "saved_activation_mib"), 4.0);
  EXPECT_DOUBLE_EQ(*value(gpu, "peak_pass_mib"), 8.0);
  EXPECT_DOUBLE_EQ(*value(gpu, "saved_by_formula_mib"), 3.0);
  EXPECT_DOUBLE_EQ(*value(gpu, "score_matrix_mib"), 2.0);
  EXPECT_DOUBLE_EQ(*value(gpu, "wall_seconds"), 1.5);
  // The cell's own kind without one given; the CSV's unit is SI.
  EXPECT_DOUBLE_EQ(**SweepCellValue(gpu, "median_forward_ms"), 1.0);
  EXPECT_DOUBLE_EQ(*(*FindSweepColumn(v1::JobSpec::kAttention, "peak_pass_mib"))->Csv(gpu),
                   8 << 20);
  EXPECT_EQ((*FindSweepColumn(v1::JobSpec::kAttention, "median_forward_ms"))->csv,
            "median_forward_s");
  // On a CPU nothing measured the memory: no value, not 0.
  EXPECT_DOUBLE_EQ(*value(r.cells(1), "median_step_ms"), 12.0);
  EXPECT_FALSE(value(r.cells(1), "saved_activation_mib").has_value());
  EXPECT_FALSE(value(r.cells(1), "peak_pass_mib").has_value());
  // An OOM cell has no figures but its wall time.
  EXPECT_FALSE(value(r.cells(2), "median_forward_ms").has_value());
  // Deriving the benchmark's columns leaves an attention cell's alone.
  DeriveSweepColumns(v1::SweepSpec(), &r);
  EXPECT_FALSE(r.cells(0).has_median_step_seconds());
  EXPECT_DOUBLE_EQ(*value(r.cells(0), "median_step_ms"), 3.0);
}

TEST(SweepTableTest, AnAttentionPivotAndItsRefusalListTheAttentionsColumns) {
  v1::SweepSpec sweep;
  auto* seq = sweep.add_axes();
  seq->set_field("seq_len");
  auto* impl = sweep.add_axes();
  impl->set_field("implementation");
  v1::SweepResult r;
  *r.add_cells() = AttentionCell({"64", "faithful"}, 0.001, true);
  *r.add_cells() = AttentionCell({"64", "math"}, 0.002, true);
  *r.add_cells() = AttentionCell({"128", "faithful"}, 0.004, true);
  *r.add_cells() = Oom({"128", "math"});
  auto p = PivotSweep(sweep, r, "seq_len", "implementation", "median_backward_ms");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->row_labels, (std::vector<std::string>{"64", "128"}));
  EXPECT_EQ(p->column_labels, (std::vector<std::string>{"faithful", "math"}));
  EXPECT_DOUBLE_EQ(*p->entries[0][0].value, 2.0);
  EXPECT_DOUBLE_EQ(*p->entries[0][1].value, 4.0);
  EXPECT_DOUBLE_EQ(*p->entries[1][0].value, 8.0);
  EXPECT_EQ(p->entries[1][1].outcome, v1::SWEEP_CELL_OUTCOME_OUT_OF_MEMORY);
  EXPECT_FALSE(p->entries[1][1].value.has_value());
  // A benchmark's column is not an attention sweep's.
  EXPECT_EQ(
      PivotSweep(sweep, r, "seq_len", "implementation", "tokens_per_second").status().message(),
      "unknown value column 'tokens_per_second'; expected one of median_forward_ms, "
      "median_backward_ms, median_step_ms, flash_forward_tflops, flash_backward_tflops, "
      "flash_step_tflops, saved_activation_mib, peak_pass_mib, saved_by_formula_mib, "
      "score_matrix_mib, wall_seconds");
  // The kind given wins over the cells' (an empty result is a benchmark's).
  EXPECT_TRUE(PivotSweep(v1::JobSpec::kAttention, sweep, v1::SweepResult(), "seq_len",
                         "implementation", "flash_forward_tflops")
                  .ok());
  EXPECT_FALSE(PivotSweep(v1::SweepSpec(sweep), v1::SweepResult(), "seq_len", "implementation",
                          "flash_forward_tflops")
                   .ok());
}

TEST(SweepTableTest, EveryKindThatSweepsHasItsOwnColumns) {
  // The benchmark's, as they always were.
  EXPECT_EQ(SweepValueColumns(), SweepValueColumns(v1::JobSpec::kBenchmark));
  EXPECT_EQ(SweepValueColumns(v1::JobSpec::KIND_NOT_SET),
            SweepValueColumns(v1::JobSpec::kBenchmark));
  std::vector<std::string> csv;
  for (const SweepColumn& c : SweepColumnsOf(v1::JobSpec::kBenchmark).columns) csv.push_back(c.csv);
  EXPECT_EQ(csv, (std::vector<std::string>{"median_step_s", "tokens_per_second", "speedup_vs_fp32",
                                           "forward_share", "backward_share", "optimizer_share",
                                           "peak_memory_bytes", "wall_seconds"}));

  // A profile: its unprofiled run's, and the profiler's overhead.
  v1::SweepCell profile;
  profile.set_outcome(v1::SWEEP_CELL_OUTCOME_OK);
  profile.mutable_spec()->mutable_profile();
  v1::ProfileResult* pr = profile.mutable_result()->mutable_profile();
  pr->set_profiler_overhead(1.25);
  pr->mutable_unprofiled()->set_peak_memory_bytes(1 << 20);
  EXPECT_EQ(SweepKind(profile), v1::JobSpec::kProfile);
  EXPECT_DOUBLE_EQ(**SweepCellValue(profile, "profiler_overhead"), 1.25);
  EXPECT_DOUBLE_EQ(**SweepCellValue(profile, "peak_memory_mib"), 1.0);
  EXPECT_FALSE(SweepCellValue(v1::SweepCell(), "profiler_overhead").ok());  // a benchmark's

  // A memory request: the largest over its runs that fit.
  v1::SweepCell memory;
  memory.set_outcome(v1::SWEEP_CELL_OUTCOME_OK);
  v1::MemoryResult* m = memory.mutable_result()->mutable_memory();
  v1::MemoryRun* fits = m->add_runs();
  fits->set_peak_allocated_bytes(6 << 20);
  fits->set_peak_reserved_bytes(8 << 20);
  fits->set_baseline_allocated_bytes(1 << 20);
  v1::MemoryRun* oom = m->add_runs();
  oom->set_out_of_memory(true);
  oom->set_peak_allocated_bytes(60 << 20);
  EXPECT_EQ(SweepKind(memory), v1::JobSpec::kMemory);  // from its result
  EXPECT_EQ(
      SweepValueColumns(v1::JobSpec::kMemory),
      (std::vector<std::string>{"peak_allocated_mib", "peak_reserved_mib", "baseline_allocated_mib",
                                "max_memory_allocated_mib", "wall_seconds"}));
  EXPECT_DOUBLE_EQ(**SweepCellValue(memory, "peak_allocated_mib"), 6.0);
  EXPECT_DOUBLE_EQ(**SweepCellValue(memory, "peak_reserved_mib"), 8.0);
  EXPECT_DOUBLE_EQ(**SweepCellValue(memory, "baseline_allocated_mib"), 1.0);

  // The precision experiments: each loop's sum and error, each dtype's loss.
  v1::SweepCell precision;
  precision.set_outcome(v1::SWEEP_CELL_OUTCOME_OK);
  precision.mutable_spec()->mutable_precision();
  v1::PrecisionResult* pp = precision.mutable_result()->mutable_precision();
  v1::PrecisionAccumulationRow* fp16 = pp->add_accumulation();
  fp16->set_name("fp16");
  fp16->set_result(9.953125);
  fp16->set_relative_error(0.0046875);
  v1::PrecisionAutocastRun* bf16 = pp->add_autocast();
  bf16->set_autocast_dtype(v1::PRECISION_BF16);
  bf16->set_loss(1.75);
  EXPECT_DOUBLE_EQ(**SweepCellValue(precision, "fp16_result"), 9.953125);
  EXPECT_DOUBLE_EQ(**SweepCellValue(precision, "fp16_relative_error"), 0.0046875);
  EXPECT_DOUBLE_EQ(**SweepCellValue(precision, "bf16_loss"), 1.75);
  EXPECT_FALSE(SweepCellValue(precision, "fp32_result")->has_value());
  EXPECT_FALSE(SweepCellValue(precision, "fp16_loss")->has_value());
  // The pivot's default: median_step_ms where the kind has one, else the first.
  EXPECT_EQ(SweepColumnsOf(v1::JobSpec::kPrecision).Default().name, "fp32_result");
  EXPECT_EQ(SweepColumnsOf(v1::JobSpec::kAttention).Default().name, "median_step_ms");
  EXPECT_EQ(SweepColumnsOf(v1::JobSpec::kBenchmark).Default().name, "median_step_ms");

  // Every kind's: unique names and CSV headers, wall_seconds last.
  for (auto kind : {v1::JobSpec::kBenchmark, v1::JobSpec::kProfile, v1::JobSpec::kMemory,
                    v1::JobSpec::kAttention, v1::JobSpec::kPrecision}) {
    const SweepColumns& t = SweepColumnsOf(kind);
    std::set<std::string> names, headers;
    for (const SweepColumn& c : t.columns) {
      EXPECT_TRUE(names.insert(c.name).second) << c.name;
      EXPECT_TRUE(headers.insert(c.csv).second) << c.csv;
    }
    EXPECT_EQ(t.columns.back().name, "wall_seconds") << SweepKindName(kind);
    for (const std::string& l : t.line) EXPECT_NE(t.Find(l), nullptr) << l;
  }
  EXPECT_EQ(SweepKindName(v1::JobSpec::kAttention), "attention");
}

}  // namespace
}  // namespace benchd
