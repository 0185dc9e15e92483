#include "client/sweep_view.h"

#include <string>

#include "client/job_view.h"
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

}  // namespace
}  // namespace benchd::client
