#include "client/job_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/list_views.h"
#include "client/test_job.h"

namespace benchd::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatsTable, MillisecondsAndPercentCv) {
  v1::BenchmarkResult r = testing::MakeSucceededJob().result().benchmark();
  EXPECT_EQ(StatsTable(r),
            "ms         median    mean    std     min     max     p95      cv\n"
            "step       12.500  12.500  0.500  11.500  13.500  13.400   4.00%\n"
            "forward     4.000   4.000  0.500   3.000   5.000   4.900  12.50%\n"
            "backward    7.550   7.550  0.500   6.550   8.550   8.450   6.62%\n"
            "optimizer   0.950   0.950  0.500  -0.050   1.950   1.850  52.63%\n"
            "host_step  12.750  12.750  0.500  11.750  13.750  13.650   3.92%\n");
}

TEST(StatsTable, SkipsPhasesTheModeDoesNotRun) {
  v1::BenchmarkResult r = testing::MakeSucceededJob().result().benchmark();
  r.mutable_backward()->Clear();
  r.mutable_optimizer()->set_max(0);
  const std::string table = StatsTable(r);
  EXPECT_THAT(table, Not(HasSubstr("backward")));
  EXPECT_THAT(table, Not(HasSubstr("optimizer")));
  EXPECT_THAT(table, HasSubstr("forward"));
}

// A noisy series says so under the table (the figure comes from the daemon:
// common/stats.cc), so a median that cannot be trusted is not read as one.
TEST(StatsTable, NoisyPhasesAreWarnedOfUnderTheTable) {
  v1::BenchmarkResult r = testing::MakeSucceededJob().result().benchmark();
  EXPECT_THAT(StatsTable(r), Not(HasSubstr("warning")));
  r.mutable_step()->set_noise_warning("interquartile range is 31.0% of the median (over 25%)");
  EXPECT_THAT(
      StatsTable(r, "  "),
      HasSubstr("  warning: step: interquartile range is 31.0% of the median (over 25%)\n"));
}

TEST(JobView, RooflineUnavailableSaysWhy) {
  v1::Job job = testing::MakeSucceededJob();
  job.mutable_result()->mutable_benchmark()->mutable_roofline()->Clear();
  job.mutable_result()->mutable_benchmark()->mutable_roofline()->set_unavailable("no memory");
  EXPECT_THAT(JobView(job), HasSubstr("Roofline     unavailable: no memory\n"));
  EXPECT_THAT(JobView(job), Not(HasSubstr("Peaks")));
}

TEST(StepsTable, FlagsWarmup) {
  v1::BenchmarkResult r = testing::MakeSucceededJob().result().benchmark();
  EXPECT_EQ(StepsTable(r),
            "index  warm-up  step ms  fwd ms  bwd ms  opt ms    loss\n"
            "    0  yes       30.100  10.000  18.000   2.100  9.2500\n"
            "    1            12.500   4.000   7.500   1.000  9.2000\n"
            "    2            12.500   4.000   7.600   0.900  9.1250\n");
}

TEST(JobView, SucceededBenchmark) {
  const std::string view = JobView(testing::MakeSucceededJob());
  EXPECT_THAT(view, HasSubstr("State        SUCCEEDED\n"));
  EXPECT_THAT(view, HasSubstr("Finished     2026-11-18 11:06:43 (ran 2.50 s)\n"));
  EXPECT_THAT(view, HasSubstr("Parameters   128,625,408\n"));
  EXPECT_THAT(view, HasSubstr("cuda:0 (NVIDIA H100 80GB HBM3)"));
  EXPECT_THAT(view, HasSubstr("small (vocab 10,000, d_model 768, d_ff 3,072, 12 layers"));
  EXPECT_THAT(view, HasSubstr("Tokens/s     40,960\n"));
  EXPECT_THAT(view, HasSubstr("TFLOP/s      98.7\n"));
  EXPECT_THAT(view, HasSubstr("FLOPs/step   1.234e+12\n"));
  EXPECT_THAT(view, HasSubstr("Peak memory  5.00 GiB (cuda_caching_allocator)\n"));
  EXPECT_THAT(view, HasSubstr("Roofline     floor 4.200 ms (matmul 3.100 + AdamW 1.100); "
                              "this step reaches 33.6% of it\n"));
  EXPECT_THAT(view, HasSubstr("Peaks        bf16 matmul 712 TFLOP/s (8192^3), copy 3,250 GB/s "
                              "(512 MiB); measured by this job in 1.20 s\n"));
  EXPECT_THAT(view, HasSubstr("Model        built in 1.50 s\n"));
  EXPECT_THAT(view, HasSubstr("Versions     benchd 0.1.0, torch 2.11.0, CUDA 13.0\n"));
  EXPECT_THAT(view, HasSubstr("Statistics (ms over 2 measured steps)\n"));
  EXPECT_THAT(view, Not(HasSubstr("Error")));
}

TEST(JobView, FailedJobShowsCodeNameAndMessage) {
  v1::Job job;
  job.set_id("j7");
  job.set_state(v1::JOB_STATE_FAILED);
  job.set_error_code(8);
  job.set_error_message("CUDA out of memory");
  job.mutable_spec()->mutable_benchmark()->mutable_model()->set_preset("xl");
  EXPECT_THAT(JobView(job), HasSubstr("Error        RESOURCE_EXHAUSTED: CUDA out of memory\n"));
  EXPECT_THAT(JobView(job), HasSubstr("Kind         benchmark\n"));
  EXPECT_EQ(FinalStateLine(job), "job j7 failed: RESOURCE_EXHAUSTED: CUDA out of memory");
}

TEST(JobView, WarningsAreShownOneALine) {
  v1::Job job = testing::MakeSucceededJob();
  EXPECT_THAT(JobView(job), Not(HasSubstr("Warning")));
  job.add_warnings("shared GPU: cuda:0 (GPU-1) was also used by pid 4242 (python3)");
  EXPECT_THAT(JobView(job),
              HasSubstr("Warning      shared GPU: cuda:0 (GPU-1) was also used by pid 4242"));
}

TEST(FinalStateLine, SucceededSummarizesTheResult) {
  EXPECT_EQ(FinalStateLine(testing::MakeSucceededJob()),
            "job j42 succeeded: median step 12.500 ms, 40,960 tokens/s, 98.7 TFLOP/s");
  v1::Job job;
  job.set_id("j8");
  job.set_state(v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(FinalStateLine(job), "job j8 was cancelled");
}

TEST(SpecSummary, ShortAndLong) {
  const v1::JobSpec spec = testing::MakeSucceededJob().spec();
  EXPECT_EQ(ShortSpecSummary(spec), "small train_step bf16 4x128");
  EXPECT_EQ(SpecSummary(spec),
            "small, train_step, bf16, batch 4, context 128, warm-up 1, steps 2, seed 0");
}

TEST(ListViews, JobsTable) {
  v1::ListJobsResponse response;
  *response.add_jobs() = testing::MakeSucceededJob();
  v1::Job* queued = response.add_jobs();
  queued->set_id("j43");
  queued->set_kind(v1::JOB_KIND_BENCHMARK);
  queued->set_state(v1::JOB_STATE_QUEUED);
  EXPECT_EQ(JobListView(response),
            "ID   KIND       STATE      DEVICE  SPEC                         CREATED (UTC)        "
            "MEDIAN STEP ms\n"
            "j42  benchmark  SUCCEEDED  cuda:0  small train_step bf16 4x128  2026-11-18 11:06:40   "
            "       12.500\n"
            "j43  benchmark  QUEUED     -       -                            -                     "
            "            -\n");
  EXPECT_EQ(JobListView({}), "no jobs\n");
}

TEST(ListViews, ModelsTable) {
  v1::ListModelsResponse response;
  v1::ResidentModel* m = response.add_models();
  m->set_key("cuda:0/small/bf16");
  m->set_device("cuda:0");
  m->mutable_model()->set_preset("small");
  m->set_precision(v1::PRECISION_BF16);
  m->set_parameter_count(128625408);
  m->set_bytes(int64_t{2} << 30);
  m->set_build_seconds(1.25);
  m->set_uses(3);
  EXPECT_EQ(ModelsView(response),
            "KEY                DEVICE  MODEL  PRECISION       PARAMS      SIZE  BUILD s  USES\n"
            "cuda:0/small/bf16  cuda:0  small  bf16       128,625,408  2.00 GiB     1.25     3\n");
}

TEST(ListViews, NodeView) {
  v1::NodeInfo node;
  node.set_hostname("gpu1");
  node.set_data_dir("/var/lib/benchd");
  v1::Device* d = node.add_devices();
  d->set_name("cuda:0");
  d->set_description("NVIDIA H100");
  d->set_total_memory_bytes(int64_t{80} << 30);
  d->set_free_memory_bytes(int64_t{79} << 30);
  d->set_worker_state(v1::WORKER_STATE_UP);
  d->set_worker_pid(1234);
  d->set_compute_capability("9.0");
  const std::string view = NodeView(node);
  EXPECT_THAT(view, HasSubstr("Host      gpu1\n"));
  EXPECT_THAT(view, HasSubstr("Metrics   -\n"));
  EXPECT_THAT(view,
              HasSubstr("cuda:0  NVIDIA H100  9.0     79.00      80.00  up      1234         0\n"));
  EXPECT_THAT(view, Not(HasSubstr("worker ")));
}

TEST(ListViews, NodeViewSaysWhyAWorkerIsNotUp) {
  v1::NodeInfo node;
  v1::Device* d = node.add_devices();
  d->set_name("cuda:1");
  d->set_worker_state(v1::WORKER_STATE_UNRESPONSIVE);
  d->set_worker_pid(77);
  d->set_worker_detail("has not answered its heartbeat for 12.0 s (bound 10 s)");
  const std::string view = NodeView(node);
  EXPECT_THAT(view, HasSubstr("unresponsive"));
  EXPECT_THAT(view,
              HasSubstr("cuda:1: worker has not answered its heartbeat for 12.0 s (bound 10 s)\n"));
}

TEST(ListViews, NodeViewShowsAParkedWorker) {
  v1::NodeInfo node;
  v1::Device* d = node.add_devices();
  d->set_name("cuda:0");
  d->set_worker_state(v1::WORKER_STATE_PARKED);
  d->set_worker_detail("parked after 61 s idle (--worker-idle-exit 60 s; pid 9 stopped)");
  const std::string view = NodeView(node);
  EXPECT_THAT(view, HasSubstr("parked"));
  EXPECT_THAT(view, HasSubstr("cuda:0: worker parked after 61 s idle"));
}

TEST(JobView, ParityBundlePathWhenExported) {
  v1::Job job = testing::MakeSucceededJob();
  EXPECT_THAT(JobView(job), Not(HasSubstr("Parity")));
  job.mutable_spec()->mutable_benchmark()->set_export_parity(true);
  job.mutable_result()->mutable_benchmark()->set_parity_bundle("/data/artifacts/7/parity.pt");
  const std::string view = JobView(job);
  EXPECT_THAT(view, HasSubstr("Parity       /data/artifacts/7/parity.pt\n"));
  EXPECT_THAT(view, HasSubstr("seed 0, export parity"));
}

}  // namespace
}  // namespace benchd::client
