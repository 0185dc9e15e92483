#include "client/ddp_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/format.h"
#include "client/job_view.h"
#include "common/ddp_spec.h"

namespace benchd::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kUnshardedState = 987648;  // 2 x 4 bytes x 123,456 parameters

v1::DdpRow MakeRow(v1::DdpVariant variant, double bucket_mb, v1::DdpOptimizer optimizer,
                   double median) {
  v1::DdpRow row;
  row.set_variant(variant);
  row.set_bucket_mb(bucket_mb);
  row.set_optimizer(optimizer);
  row.add_step_seconds(median);
  row.add_step_seconds(median);
  row.mutable_step()->set_count(2);
  row.mutable_step()->set_median(median);
  row.mutable_step()->set_p95(median + 0.0005);
  row.mutable_step()->set_cv(0.02);
  row.set_exposed_comm_seconds(median - 0.010);
  row.set_exposed_comm_fraction((median - 0.010) / median);
  row.set_calls_per_step(variant == v1::DDP_VARIANT_UNSPECIFIED ? 0 : 20);
  row.set_bytes_per_step(variant == v1::DDP_VARIANT_UNSPECIFIED ? 0 : 493824);
  row.set_ranks_agree(true);
  row.set_optimizer_state_bytes(kUnshardedState);
  row.set_unsharded_optimizer_state_bytes(kUnshardedState);
  row.set_loss(4.5);
  for (int rank = 0; rank < 2; ++rank) {
    v1::DdpRank* r = row.add_ranks();
    r->set_rank(rank);
    r->set_device("cpu:" + std::to_string(rank));
    r->set_step_median_seconds(median - 0.0001 * rank);
    r->set_comm_host_median_seconds(0.0015);
    r->set_optimizer_state_bytes(kUnshardedState);
  }
  return row;
}

// Two CPU ranks over a transient Gloo group: compute only, naive, bucketed
// 25 MB with the sharded optimizer (3 GiB peak, half the state), and naive
// with the sharded optimizer whose ranks diverged.
v1::DdpResult MakeResult() {
  v1::DdpResult r;
  v1::DdpSpec* spec = r.mutable_spec();
  spec->mutable_target()->add_devices("cpu:0");
  spec->mutable_target()->add_devices("cpu:1");
  spec->mutable_target()->set_backend(v1::COLLECTIVE_BACKEND_GLOO);
  v1::BenchmarkSpec* step = spec->mutable_step();
  step->mutable_model()->set_vocab_size(97);
  step->mutable_model()->set_d_model(32);
  step->mutable_model()->set_num_layers(2);
  step->mutable_model()->set_num_heads(4);
  step->set_mode(v1::BENCHMARK_MODE_TRAIN_STEP);
  step->set_batch_size(4);
  step->set_context_length(16);
  step->set_warmup_steps(1);
  step->set_measure_steps(2);
  spec->set_global_batch_size(8);
  spec->add_variants(v1::DDP_VARIANT_NAIVE);
  spec->add_variants(v1::DDP_VARIANT_BUCKETED);
  spec->add_bucket_mb(25);
  spec->add_optimizers(v1::DDP_OPTIMIZER_ADAMW);
  spec->add_optimizers(v1::DDP_OPTIMIZER_SHARDED_ADAMW);
  spec->set_timeout_seconds(300);
  v1::CollectiveGroupUse* group = r.mutable_group();
  group->set_group("t1");
  group->set_backend(v1::COLLECTIVE_BACKEND_GLOO);
  group->add_devices("cpu:0");
  group->add_devices("cpu:1");
  group->set_transient(true);
  group->set_setup_seconds(0.123);
  r.set_world_size(2);
  r.set_global_batch_size(8);
  r.set_parameter_count(123456);
  r.set_device_name("cpu");
  r.set_timer("host_steady_clock");
  *r.mutable_compute_only() =
      MakeRow(v1::DDP_VARIANT_UNSPECIFIED, 0, v1::DDP_OPTIMIZER_ADAMW, 0.010);
  r.mutable_compute_only()->set_ranks_agree(false);  // no synchronisation: not compared
  v1::DdpRow* naive = r.add_rows();
  *naive = MakeRow(v1::DDP_VARIANT_NAIVE, 0, v1::DDP_OPTIMIZER_ADAMW, 0.012);
  naive->set_predicted_exposed_comm_seconds(0.0015);
  // Rank 0's profiled step: computing 0..8 ms, communicating 6..10 ms; rank
  // 1 the same: 2 of 4 ms hidden.
  for (v1::DdpRank& rank : *naive->mutable_ranks()) {
    v1::DdpTimeline* t = rank.mutable_timeline();
    t->set_step_seconds(0.010);
    t->set_comm_seconds(0.004);
    t->set_comm_overlapped_seconds(0.002);
    v1::DdpSpan* compute = t->add_spans();
    compute->set_lane(v1::DDP_LANE_COMPUTE);
    compute->set_end_seconds(0.008);
    v1::DdpSpan* comm = t->add_spans();
    comm->set_lane(v1::DDP_LANE_COMMUNICATION);
    comm->set_start_seconds(0.006);
    comm->set_end_seconds(0.010);
  }
  r.set_timeline_artifact("ddp-timeline.svg");
  v1::DdpOverheadModel* model = r.mutable_overhead_model();
  model->set_formula("o + s / w");
  model->set_per_call_seconds(25e-6);
  model->set_bandwidth_bytes_per_second(1.5e9);
  model->add_sweep_bytes(4096);
  model->add_sweep_bytes(4 << 20);
  model->add_sweep_seconds(3e-5);
  model->add_sweep_seconds(3e-3);
  model->set_backward_seconds(0.006);
  model->set_gradient_bytes(493824);
  model->set_predicted_best_bucket_mb(12.5);
  model->set_predicted_best_exposed_seconds(0.001);
  model->set_measured_best_bucket_mb(25);
  model->set_best_bucket_ratio(0.5);
  v1::DdpRow* bucketed = r.add_rows();
  *bucketed = MakeRow(v1::DDP_VARIANT_BUCKETED, 25, v1::DDP_OPTIMIZER_SHARDED_ADAMW, 0.011);
  bucketed->set_buckets(1);
  bucketed->set_optimizer_state_bytes(kUnshardedState / 2);
  bucketed->set_peak_memory_bytes(int64_t{3} << 30);
  v1::DdpRow* diverged = r.add_rows();
  *diverged = MakeRow(v1::DDP_VARIANT_NAIVE, 0, v1::DDP_OPTIMIZER_SHARDED_ADAMW, 0.013);
  diverged->set_optimizer_state_bytes(kUnshardedState / 2);
  diverged->set_ranks_agree(false);
  return r;
}

// A key of the view's key/value block, padded as `get` pads its keys.
std::string Key(const std::string& key) { return key + std::string(13 - key.size(), ' '); }

std::string Label(const v1::DdpRow& row) { return DdpRunLabel(DdpRunOf(row)); }

// The table's line for a run, split into its cells (separated by 2+ spaces).
std::vector<std::string> Cells(const std::string& table, const std::string& label) {
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    if (!absl::StartsWith(line, label + "  ")) continue;
    std::vector<std::string> cells;
    for (absl::string_view cell : absl::StrSplit(line, "  ", absl::SkipWhitespace())) {
      cells.emplace_back(absl::StripAsciiWhitespace(cell));
    }
    return cells;
  }
  ADD_FAILURE() << "no line for " << label << " in\n" << table;
  return {};
}

// Columns of DdpTable.
enum Column {
  kRun,
  kStep,
  kP95,
  kCv,
  kExposedMs,
  kExposed,
  kPredicted,
  kHidden,
  kCalls,
  kMb,
  kBuckets,
  kPeak,
  kState,
  kAgree,
  kLoss
};

TEST(DdpTable, OneLinePerRunComputeOnlyFirst) {
  const v1::DdpResult r = MakeResult();
  const std::string table = DdpTable(r);
  const std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << table;  // header + compute only + 3 runs
  EXPECT_THAT(lines[0], HasSubstr("step ms"));
  EXPECT_THAT(lines[0], HasSubstr("ranks agree"));
  EXPECT_TRUE(absl::StartsWith(lines[1], "compute only")) << table;
  EXPECT_TRUE(absl::StartsWith(lines[2], Label(r.rows(0)))) << table;
  EXPECT_TRUE(absl::StartsWith(lines[3], Label(r.rows(1)))) << table;
  EXPECT_TRUE(absl::StartsWith(lines[4], Label(r.rows(2)))) << table;
}

TEST(DdpTable, ComputeOnlyHasNoCommunicationAndIsNotCompared) {
  const std::vector<std::string> c = Cells(DdpTable(MakeResult()), "compute only");
  ASSERT_EQ(c.size(), 15u);
  EXPECT_EQ(c[kStep], "10.000");
  EXPECT_EQ(c[kP95], "10.500");
  EXPECT_EQ(c[kCv], "2.00%");
  for (Column col :
       {kExposedMs, kExposed, kPredicted, kHidden, kCalls, kMb, kBuckets, kPeak, kAgree}) {
    EXPECT_EQ(c[col], "-") << col;
  }
  EXPECT_EQ(c[kLoss], "4.5000");
}

TEST(DdpTable, NaiveRowShowsExposedCommunicationAndItsTraffic) {
  const v1::DdpResult r = MakeResult();
  const std::vector<std::string> c = Cells(DdpTable(r), Label(r.rows(0)));
  ASSERT_EQ(c.size(), 15u);
  EXPECT_EQ(c[kStep], "12.000");
  EXPECT_EQ(c[kExposedMs], "2.000");
  EXPECT_EQ(c[kExposed], "16.67%");
  EXPECT_EQ(c[kPredicted], "1.500");
  EXPECT_EQ(c[kHidden], "50.00%");
  EXPECT_EQ(c[kCalls], "20");
  EXPECT_EQ(c[kMb], "0.494");
  EXPECT_EQ(c[kBuckets], "-");
  EXPECT_EQ(c[kPeak], "-");  // a CPU run has no allocator peak
  EXPECT_EQ(c[kState], FormatBytes(kUnshardedState));
  EXPECT_EQ(c[kAgree], "yes");
}

TEST(DdpTable, ShardedBucketedRowShowsBucketsAndTheUnshardedStateBeside) {
  const v1::DdpResult r = MakeResult();
  const std::vector<std::string> c = Cells(DdpTable(r), Label(r.rows(1)));
  ASSERT_EQ(c.size(), 15u);
  EXPECT_EQ(c[kRun], "bucketed 25 MB + sharded_adamw");
  EXPECT_EQ(c[kBuckets], "1");
  EXPECT_EQ(c[kPeak], "3.00 GiB");
  EXPECT_EQ(c[kState],
            FormatBytes(kUnshardedState / 2) + " (unsharded " + FormatBytes(kUnshardedState) + ")");
  EXPECT_EQ(c[kAgree], "yes");
}

TEST(DdpTable, DivergedRowSaysSoLoudly) {
  const v1::DdpResult r = MakeResult();
  const std::vector<std::string> c = Cells(DdpTable(r), Label(r.rows(2)));
  ASSERT_EQ(c.size(), 15u);
  EXPECT_EQ(c[kAgree], "DIVERGED");
}

TEST(DdpResultView, OverheadModelAndRankZerosTimelines) {
  const v1::DdpResult r = MakeResult();
  const std::string view = DdpResultView(r);
  EXPECT_THAT(view, HasSubstr("Overhead model: all_reduce(s) = 25.0 us + s / 1.50 GB/s, fitted "
                              "to 2 sizes (4.00 KiB .. 4.00 MiB) on this group\n"));
  EXPECT_THAT(view, HasSubstr("predicted best bucket 12.5 MB (exposed 1.000 ms); measured best "
                              "of the sizes run 25.0 MB: predicted / measured 0.50\n"));
  // 64 columns for the longest step (10 ms): computing to 8 ms, then 6 .. 10 ms.
  const std::string label = Label(r.rows(0));
  EXPECT_THAT(view, HasSubstr(label + " |" + std::string(52, '#') + std::string(12, ' ') + "|\n"));
  EXPECT_THAT(view, HasSubstr(std::string(label.size(), ' ') + " |" + std::string(38, ' ') +
                              std::string(26, '=') + "|\n"));
  EXPECT_THAT(view, HasSubstr("every rank: ddp-timeline.svg"));
  // Rows without a timeline are not drawn.
  EXPECT_THAT(view, Not(HasSubstr("compute only |")));

  v1::DdpResult failed = r;
  failed.mutable_overhead_model()->set_unavailable("the sweep's times do not grow with size");
  EXPECT_THAT(DdpModelView(failed),
              HasSubstr("Overhead model: not made: the sweep's times do not grow with size"));
  EXPECT_EQ(DdpModelView(v1::DdpResult()), "");
}

TEST(DdpResultView, HeaderSaysWhatRanWhereAndHow) {
  const std::string view = DdpResultView(MakeResult());
  EXPECT_THAT(view, HasSubstr(Key("Ranks") + "2: cpu:0, cpu:1\n"));
  EXPECT_THAT(view, HasSubstr(Key("Group") + "t1 (gloo on cpu:0,cpu:1): set up for this job in "
                                             "0.123 s (transient, destroyed after)\n"));
  EXPECT_THAT(view, HasSubstr(Key("Parameters") + "123,456\n"));
  EXPECT_THAT(view, HasSubstr(Key("Batch") + "global 8 = 2 ranks x 4 sequences of 16 tokens (128 "
                                             "tokens/step)\n"));
  EXPECT_THAT(view, HasSubstr(Key("Steps") + "1 warm-up + 2 measured per run"));
  EXPECT_THAT(view, HasSubstr(Key("Device") + "cpu\n"));
  EXPECT_THAT(view, HasSubstr(Key("Timer") + "host_steady_clock\n"));
  EXPECT_THAT(view, HasSubstr(DdpTable(MakeResult())));
  EXPECT_THAT(view, HasSubstr(DdpRanksTable(MakeResult())));
}

TEST(DdpResultView, ResidentGroupPaidNoSetUp) {
  v1::DdpResult r = MakeResult();
  r.mutable_group()->set_transient(false);
  r.mutable_group()->set_was_resident(true);
  r.mutable_group()->set_setup_seconds(0);
  EXPECT_THAT(
      DdpResultView(r),
      HasSubstr(Key("Group") + "t1 (gloo on cpu:0,cpu:1): resident, no set-up in this job\n"));
}

TEST(DdpResultView, VerdictOnTheRanksParameters) {
  v1::DdpResult r = MakeResult();
  const std::string diverged = DdpResultView(r);
  EXPECT_THAT(diverged,
              HasSubstr("DIVERGED: after " + Label(r.rows(2)) + " the ranks' parameters differ"));
  EXPECT_THAT(diverged, Not(HasSubstr("ranks agree: every")));
  r.mutable_rows(2)->set_ranks_agree(true);
  const std::string agreed = DdpResultView(r);
  EXPECT_THAT(agreed, HasSubstr("ranks agree: every synchronised run left the same parameters"));
  EXPECT_THAT(agreed, Not(HasSubstr("DIVERGED")))
      << "compute only's ranks train apart: never called diverged";
}

TEST(DdpRanksTable, OneLinePerRankOfEachRun) {
  const v1::DdpResult r = MakeResult();
  const std::string table = DdpRanksTable(r);
  const std::vector<std::string> lines = absl::StrSplit(table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u + 4 * 2) << table;
  EXPECT_THAT(lines[1], HasSubstr("cpu:0"));
  EXPECT_THAT(lines[2], HasSubstr("cpu:1"));
  EXPECT_THAT(lines[2], HasSubstr("9.900"));  // rank 1's own median
  EXPECT_THAT(lines[3], HasSubstr("1.500"));  // a synchronised run's time in the calls
  EXPECT_THAT(lines[1], Not(HasSubstr("1.500")));
}

TEST(DdpRowLine, SaysTheRunAndWhetherTheRanksDiverged) {
  const v1::DdpResult r = MakeResult();
  EXPECT_EQ(DdpRowLine(r.compute_only()), "run compute only: step 10.000 ms, loss 4.5000");
  EXPECT_EQ(DdpRowLine(r.rows(0)), "run " + Label(r.rows(0)) +
                                       ": step 12.000 ms, exposed comm 2.000 ms (16.67%), 0.494 "
                                       "MB/step (predicted 1.500 ms), loss 4.5000");
  EXPECT_THAT(DdpRowLine(r.rows(2)), HasSubstr(", ranks DIVERGED, "));
}

TEST(DdpFinalSummary, ComputeOnlyTheFastestRunAndDivergedRuns) {
  v1::DdpResult r = MakeResult();
  EXPECT_EQ(DdpFinalSummary(r),
            "compute only 10.000 ms; fastest bucketed 25 MB + sharded_adamw 11.000 ms (exposed "
            "1.000 ms, 9.09%); 1 run DIVERGED");
  r.mutable_rows(2)->set_ranks_agree(true);
  EXPECT_THAT(DdpFinalSummary(r), Not(HasSubstr("DIVERGED")));
}

TEST(DdpSpecSummary, EverySetField) {
  const v1::DdpResult r = MakeResult();
  EXPECT_EQ(DdpSpecSummary(r.spec()),
            "custom (vocab 97, d_model 32, 2 layers, 4 heads), fp32, cpu:0,cpu:1 (gloo), global "
            "batch 8 (4 per rank), context 16, warm-up 1, steps 2, seed 0, variants naive, "
            "bucketed, buckets 25 MB, optimizers adamw, sharded_adamw, group timeout 300 s");
  v1::DdpSpec bare;
  bare.mutable_target()->set_group("g1");
  EXPECT_EQ(DdpSpecSummary(bare), "custom, fp32, group g1, seed 0");
}

TEST(DdpCsv, OneRowPerRunComputeOnlyFirst) {
  v1::Job job;
  job.set_id("j7");
  *job.mutable_result()->mutable_ddp() = MakeResult();
  const std::vector<std::string> lines = absl::StrSplit(DdpCsv(job), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], kDdpCsvHeader);
  // Floats print in shortest round-trip form: compare the fields that are exact.
  EXPECT_TRUE(absl::StartsWith(lines[1], "j7,compute only,,0,adamw,0.01,")) << lines[1];
  EXPECT_TRUE(absl::EndsWith(lines[1], ",0,0,0,0,0,0,987648,987648,false,4.5,,")) << lines[1];
  EXPECT_TRUE(
      absl::StartsWith(lines[2], "j7," + Label(MakeResult().rows(0)) + ",naive,0,adamw,0.012,"))
      << lines[2];
  // The prediction and the hidden share of the profiled step's communication.
  EXPECT_TRUE(absl::EndsWith(lines[2], ",true,4.5,0.0015,0.5")) << lines[2];
  EXPECT_TRUE(
      absl::StartsWith(lines[3], "j7,bucketed 25 MB + sharded_adamw,bucketed,25,sharded_adamw,"))
      << lines[3];
  EXPECT_TRUE(absl::EndsWith(lines[3], ",20,493824,1,3221225472,493824,987648,true,4.5,,"))
      << lines[3];
  EXPECT_TRUE(absl::EndsWith(lines[4], ",false,4.5,,")) << lines[4];
}

TEST(DdpJobView, GetAndWatchShowTheDdpResult) {
  v1::Job job;
  job.set_id("j7");
  job.set_kind(v1::JOB_KIND_DDP);
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  *job.mutable_result()->mutable_ddp() = MakeResult();
  *job.mutable_spec()->mutable_ddp() = MakeResult().spec();
  const std::string view = JobView(job);
  EXPECT_THAT(view, HasSubstr(DdpResultView(job.result().ddp())));
  EXPECT_THAT(view, HasSubstr(Key("Spec") + DdpSpecSummary(job.spec().ddp()) + "\n"));
  EXPECT_EQ(FinalStateLine(job), "job j7 succeeded: " + DdpFinalSummary(job.result().ddp()));
  EXPECT_EQ(ShortSpecSummary(job.spec()), "ddp d32/L2 fp32 2 ranks");
}

}  // namespace
}  // namespace benchd::client
