#include "client/sweep_view.h"

#include <string>

#include "client/job_view.h"
#include "common/sweep_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace benchd::client {
namespace {

using ::testing::HasSubstr;

v1::JobSpec Benchmark() {
  v1::JobSpec spec;
  spec.mutable_benchmark()->mutable_model()->set_preset("tiny");
  return spec;
}

TEST(SweepViewTest, SweepFlagsBecomeAxesWithCanonicalValues) {
  v1::JobSpec spec = Benchmark();
  ASSERT_TRUE(
      ApplySweepFlags({"precision=FP32,PRECISION_BF16", "model.preset=small,medium"}, 30, &spec)
          .ok());
  ASSERT_EQ(spec.sweep().axes_size(), 2);
  EXPECT_EQ(spec.sweep().axes(0).field(), "precision");
  EXPECT_THAT(spec.sweep().axes(0).values(), ::testing::ElementsAre("fp32", "bf16"));
  EXPECT_THAT(spec.sweep().axes(1).values(), ::testing::ElementsAre("small", "medium"));
  EXPECT_EQ(spec.sweep().cell_timeout_seconds(), 30);
  v1::JobSpec none = Benchmark();
  ASSERT_TRUE(ApplySweepFlags({}, std::nullopt, &none).ok());
  EXPECT_FALSE(none.has_sweep());
}

TEST(SweepViewTest, BadSweepFlagsAreUsageErrorsNamingTheFlag) {
  v1::JobSpec spec = Benchmark();
  EXPECT_EQ(ApplySweepFlags({"precision"}, std::nullopt, &spec).message(),
            "--sweep: expected FIELD=V1,V2,... (e.g. precision=fp32,bf16), got 'precision'");
  spec = Benchmark();
  EXPECT_THAT(std::string(ApplySweepFlags({"mode=walk"}, std::nullopt, &spec).message()),
              HasSubstr("--sweep mode: 'walk' is not a value of mode"));
  spec = Benchmark();
  EXPECT_THAT(std::string(ApplySweepFlags({"modle=x"}, std::nullopt, &spec).message()),
              HasSubstr("--sweep modle: 'modle' is not a field of benchd.v1.BenchmarkSpec"));
  spec = Benchmark();
  EXPECT_EQ(ApplySweepFlags({}, 5, &spec).message(),
            "--cell-timeout needs --sweep: it limits each cell");
}

// Two precisions x two presets, one out of memory.
v1::Job SweepJob() {
  v1::Job job;
  job.set_id("9");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  v1::JobSpec spec = Benchmark();
  EXPECT_TRUE(
      ApplySweepFlags({"model.preset=small,medium", "precision=fp32,bf16"}, std::nullopt, &spec)
          .ok());
  *job.mutable_spec() = spec;
  v1::SweepResult* r = job.mutable_result()->mutable_sweep();
  r->set_cells_total(4);
  const double medians[] = {0.010, 0.004, 0, 0.020};
  const char* values[][2] = {
      {"small", "fp32"}, {"small", "bf16"}, {"medium", "fp32"}, {"medium", "bf16"}};
  for (int i = 0; i < 4; ++i) {
    v1::SweepCell* c = r->add_cells();
    c->set_index(i);
    c->add_values(values[i][0]);
    c->add_values(values[i][1]);
    if (medians[i] == 0) {
      c->set_outcome(v1::SWEEP_CELL_OUTCOME_OUT_OF_MEMORY);
      c->set_error_code(8);
      c->set_error_message("out of memory on cuda:0, \"medium\"");
      continue;
    }
    c->set_outcome(v1::SWEEP_CELL_OUTCOME_OK);
    v1::BenchmarkResult* b = c->mutable_result()->mutable_benchmark();
    b->mutable_step()->set_count(3);
    b->mutable_step()->set_median(medians[i]);
    b->mutable_step()->set_mean(medians[i]);
    b->set_tokens_per_second(1000 / medians[i]);
  }
  return job;
}

TEST(SweepViewTest, ThePivotIsTheWriteUpsLayoutWithOomCells) {
  auto text = SweepPivotText(SweepJob(), {"model.preset,precision", "median_step_ms"}, false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text,
            "median_step_ms by model.preset and precision\n"
            "model.preset\\precision   fp32   bf16\n"
            "small                   10.00   4.00\n"
            "medium                    OOM  20.00\n");
  auto csv = SweepPivotText(SweepJob(), {"model.preset,precision", "speedup_vs_fp32"}, true);
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(*csv,
            "model.preset\\precision,fp32,bf16\n"
            "small,1,2.5\n"
            "medium,OOM,-\n");
  EXPECT_EQ(SweepPivotText(SweepJob(), {"precision", "median_step_ms"}, false).status().message(),
            "--pivot: expected ROWS,COLS (two axes of the sweep, e.g. model.preset,precision), "
            "got 'precision'");
  EXPECT_THAT(
      std::string(SweepPivotText(SweepJob(), {"mode,precision", "median_step_ms"}, false)
                      .status()
                      .message()),
      HasSubstr("'mode' is not an axis of the sweep; its axes are model.preset, precision"));
}

TEST(SweepViewTest, CsvHasOneRowPerCellAndTheTableEveryCell) {
  const v1::Job job = SweepJob();
  const std::string csv = SweepCsv(job);
  EXPECT_THAT(csv, HasSubstr("job_id,index,model.preset,precision,outcome,median_step_s,"
                             "tokens_per_second,speedup_vs_fp32,forward_share,backward_share,"
                             "optimizer_share,peak_memory_bytes,wall_seconds,error_code,"
                             "error_message\n"));
  EXPECT_THAT(csv, HasSubstr("\n9,1,small,bf16,ok,0.004,250000,2.5,,,,,0,0,\n"));
  EXPECT_THAT(csv, HasSubstr("\n9,2,medium,fp32,out_of_memory,,,,,,,,0,8,"
                             "\"out of memory on cuda:0, \"\"medium\"\"\"\n"));
  const std::string table = SweepTable(job.spec().sweep(), job.result().sweep());
  EXPECT_THAT(table, HasSubstr("Sweep: 4 of 4 cells ran: 3 ok, 1 out of memory"));
  EXPECT_THAT(table, HasSubstr("out_of_memory"));
  EXPECT_EQ(SweepSummary(job.spec().sweep()),
            "model.preset=small,medium x precision=fp32,bf16 (4 cells)");
  EXPECT_EQ(ShortSpecSummary(job.spec()), "benchmark sweep model.preset x precision (4 cells)");
  EXPECT_THAT(JobView(job), HasSubstr("Sweep: 4 of 4 cells ran: 3 ok, 1 out of memory"));
}

TEST(SweepViewTest, ACellLineForWatch) {
  v1::Job job = SweepJob();
  v1::SweepResult r = job.result().sweep();
  v1::SweepCell c = r.cells(2);
  EXPECT_EQ(SweepCellLine(c, 4),
            "cell 3/4 medium fp32: out_of_memory: out of memory on cuda:0, \"medium\"");
}

TEST(SweepViewTest, TheBenchmarksCellLineAndDefaultPivotAreAsTheyWere) {
  v1::Job job = SweepJob();
  v1::SweepResult r = job.result().sweep();
  DeriveSweepColumns(job.spec().sweep(), &r);
  EXPECT_EQ(SweepCellLine(r.cells(1), 4),
            "cell 2/4 small bf16: ok, median step 4.000 ms, 2.50x fp32, 250,000 tokens/s");
  auto text = SweepPivotText(job, {"model.preset,precision", ""}, false);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("median_step_ms by model.preset and precision\n"));
  EXPECT_THAT(*text, HasSubstr("10.00"));
}

// seq_len 64, 128 x implementation faithful, math: three cells ran (on
// CUDA, so memory was measured), one ran out of memory.
v1::Job AttentionSweepJob() {
  v1::Job job;
  job.set_id("7");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  v1::JobSpec spec;
  spec.mutable_attention()->set_head_dim(16);
  EXPECT_TRUE(
      ApplySweepFlags({"seq_len=64,128", "implementation=faithful,math"}, std::nullopt, &spec)
          .ok());
  *job.mutable_spec() = spec;
  v1::SweepResult* r = job.mutable_result()->mutable_sweep();
  r->set_cells_total(4);
  struct Figures {
    const char* seq;
    const char* impl;
    double forward, backward, step;
  };
  const Figures cells[] = {{"64", "faithful", 0.001, 0.002, 0.003},
                           {"64", "math", 0.0005, 0.0015, 0.002},
                           {"128", "faithful", 0.004, 0.008, 0.012},
                           {"128", "math", 0, 0, 0}};
  for (int i = 0; i < 4; ++i) {
    v1::SweepCell* c = r->add_cells();
    c->set_index(i);
    c->add_values(cells[i].seq);
    c->add_values(cells[i].impl);
    c->mutable_spec()->mutable_attention()->set_seq_len(std::stoi(cells[i].seq));
    c->set_wall_seconds(0.25);
    if (cells[i].forward == 0) {
      c->set_outcome(v1::SWEEP_CELL_OUTCOME_OUT_OF_MEMORY);
      c->set_error_code(8);
      c->set_error_message("out of memory on cuda:0");
      continue;
    }
    c->set_outcome(v1::SWEEP_CELL_OUTCOME_OK);
    v1::AttentionResult* a = c->mutable_result()->mutable_attention();
    auto stats = [](v1::Stats* s, double median) {
      s->set_count(3);
      s->set_median(median);
      s->set_mean(median);
    };
    stats(a->mutable_forward(), cells[i].forward);
    stats(a->mutable_backward(), cells[i].backward);
    stats(a->mutable_step(), cells[i].step);
    a->set_flash_forward_tflops_per_second(0.5 / (i + 1));
    a->set_flash_backward_tflops_per_second(1.25);
    a->set_flash_step_tflops_per_second(1.0);
    a->set_memory_source("cuda_caching_allocator");
    a->set_saved_activation_bytes(int64_t{3} << 20);
    a->set_peak_pass_bytes(int64_t{5} << 19);  // 2.5 MiB
    a->set_score_matrix_bytes(int64_t{1} << 20);
    a->set_saved_by_formula_bytes(int64_t{2} << 20);
  }
  return job;
}

TEST(SweepViewTest, AnAttentionSweepsTableCsvAndPivotAreItsOwnFigures) {
  const v1::Job job = AttentionSweepJob();
  const std::string csv = SweepCsv(job);
  EXPECT_THAT(csv, HasSubstr("job_id,index,seq_len,implementation,outcome,median_forward_s,"
                             "median_backward_s,median_step_s,flash_forward_tflops_per_second,"
                             "flash_backward_tflops_per_second,flash_step_tflops_per_second,"
                             "saved_activation_bytes,peak_pass_bytes,saved_by_formula_bytes,"
                             "score_matrix_bytes,wall_seconds,error_code,error_message\n"));
  EXPECT_THAT(csv, HasSubstr("\n7,0,64,faithful,ok,0.001,0.002,0.003,0.5,1.25,1,3145728,2621440,"
                             "2097152,1048576,0.25,0,\n"));
  EXPECT_THAT(csv, HasSubstr("\n7,1,64,math,ok,0.0005,0.0015,0.002,0.25,1.25,1,"));
  // The failed cell keeps its outcome row.
  EXPECT_THAT(csv,
              HasSubstr("\n7,3,128,math,out_of_memory,,,,,,,,,,,0.25,8,out of memory on cuda:0\n"));

  const std::string table = SweepTable(job.spec().sweep(), job.result().sweep());
  for (const char* header : {"fwd ms", "bwd ms", "fwd+bwd ms", "fwd TFLOP/s", "bwd TFLOP/s",
                             "fwd+bwd TFLOP/s", "saved MiB", "peak MiB", "wall"}) {
    EXPECT_THAT(table, HasSubstr(header)) << table;
  }
  EXPECT_THAT(table, ::testing::Not(HasSubstr("tokens/s")));
  EXPECT_THAT(table,
              ::testing::ContainsRegex(
                  "64 +faithful +ok +1\\.000 +2\\.000 +3\\.000 +0\\.500 +1\\.25 +1\\.00 +3\\.0 "
                  "+2\\.5 +0\\.25 s"))
      << table;
  EXPECT_THAT(table, ::testing::ContainsRegex("128 +math +out_of_memory +0\\.25 s +out of memory"))
      << table;
  EXPECT_THAT(JobView(job), HasSubstr("fwd+bwd ms"));

  // The pivot: fwd+bwd by default, any of attention's columns by --value.
  auto pivot = SweepPivotText(job, {"seq_len,implementation", ""}, false);
  ASSERT_TRUE(pivot.ok()) << pivot.status();
  EXPECT_EQ(*pivot,
            "median_step_ms by seq_len and implementation\n"
            "seq_len\\implementation  faithful  math\n"
            "64                          3.00  2.00\n"
            "128                        12.00   OOM\n");
  auto forward = SweepPivotText(job, {"seq_len,implementation", "median_forward_ms"}, true);
  ASSERT_TRUE(forward.ok()) << forward.status();
  EXPECT_EQ(*forward,
            "seq_len\\implementation,faithful,math\n"
            "64,1,0.5\n"
            "128,4,OOM\n");
  auto tflops = SweepPivotText(job, {"implementation,seq_len", "flash_forward_tflops"}, false);
  ASSERT_TRUE(tflops.ok()) << tflops.status();
  EXPECT_THAT(*tflops, HasSubstr("faithful                0.500  0.167\n"));
  // A benchmark's column is refused, listing the attention sweep's.
  EXPECT_EQ(SweepPivotText(job, {"seq_len,implementation", "tokens_per_second"}, false)
                .status()
                .message(),
            "unknown value column 'tokens_per_second'; expected one of median_forward_ms, "
            "median_backward_ms, median_step_ms, flash_forward_tflops, flash_backward_tflops, "
            "flash_step_tflops, saved_activation_mib, peak_pass_mib, saved_by_formula_mib, "
            "score_matrix_mib, wall_seconds");
}

TEST(SweepViewTest, AnAttentionCellLine) {
  const v1::Job job = AttentionSweepJob();
  EXPECT_EQ(SweepCellLine(job.result().sweep().cells(0), 4),
            "cell 1/4 64 faithful: ok, fwd 1.000 ms, bwd 2.000 ms, fwd+bwd 3.000 ms, fwd 0.500 "
            "TFLOP/s, bwd 1.25 TFLOP/s, saved 3.0 MiB, peak 2.5 MiB");
  EXPECT_EQ(SweepCellLine(job.result().sweep().cells(3), 4),
            "cell 4/4 128 math: out_of_memory: out of memory on cuda:0");
}

}  // namespace
}  // namespace benchd::client
