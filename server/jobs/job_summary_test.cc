// ListJobs' summaries: scalar figures kept, every array dropped, the spec whole.
#include "server/jobs/job_summary.h"

#include "gtest/gtest.h"

namespace benchd::server {
namespace {

TEST(JobSummaryTest, KeepsTheHeadlineFiguresAndDropsEveryArray) {
  v1::Job job;
  job.set_id("3");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.add_devices("cpu:0");
  job.mutable_spec()->mutable_benchmark()->set_measure_steps(100000);
  v1::BenchmarkResult* r = job.mutable_result()->mutable_benchmark();
  r->mutable_spec()->set_measure_steps(100000);
  for (int i = 0; i < 100; ++i) r->add_steps()->set_step_seconds(0.01);
  r->mutable_step()->set_median(0.01);
  r->set_tokens_per_second(51200);
  r->set_tflops_per_second(0.5);
  r->set_steps_total(100000);
  r->mutable_versions()->set_torch("2.11.0");

  const v1::Job s = SummarizeJob(job);
  EXPECT_TRUE(s.summary());
  EXPECT_EQ(s.id(), "3");
  EXPECT_EQ(s.devices(0), "cpu:0");
  EXPECT_EQ(s.spec().SerializeAsString(), job.spec().SerializeAsString());
  const v1::BenchmarkResult& b = s.result().benchmark();
  EXPECT_EQ(b.steps_size(), 0);
  EXPECT_EQ(b.step().median(), 0.01);
  EXPECT_EQ(b.tokens_per_second(), 51200);
  EXPECT_EQ(b.tflops_per_second(), 0.5);
  EXPECT_EQ(b.steps_total(), 100000);
  EXPECT_EQ(b.versions().torch(), "2.11.0");
  EXPECT_EQ(b.spec().measure_steps(), 100000);
}

TEST(JobSummaryTest, DropsArraysAtEveryDepthButTheSpecs) {
  v1::JobResult result;
  v1::ProfileResult* p = result.mutable_profile();
  p->mutable_spec()->add_activities(v1::PROFILER_ACTIVITY_CPU);
  p->add_ranges()->add_kernels()->set_name("aten::mm");
  p->add_artifacts("trace.json");
  p->mutable_unprofiled()->add_steps()->set_step_seconds(0.1);
  p->mutable_unprofiled()->mutable_step()->set_median(0.1);
  p->mutable_profiled_step()->set_median(0.2);
  p->set_trace_artifact("trace.json");
  SummarizeResult(&result);
  EXPECT_EQ(p->ranges_size(), 0);
  EXPECT_EQ(p->artifacts_size(), 0);
  EXPECT_EQ(p->unprofiled().steps_size(), 0);
  EXPECT_EQ(p->unprofiled().step().median(), 0.1);
  EXPECT_EQ(p->profiled_step().median(), 0.2);
  EXPECT_EQ(p->trace_artifact(), "trace.json");
  EXPECT_EQ(p->spec().activities_size(), 1);

  v1::JobResult coll;
  v1::CollectiveResult* c = coll.mutable_collective();
  c->mutable_spec()->add_sizes_bytes(1 << 20);
  c->add_rows()->add_iteration_seconds(1e-5);
  c->add_plots()->set_svg("<svg/>");
  c->set_wrong_elements(3);
  SummarizeResult(&coll);
  EXPECT_EQ(c->rows_size(), 0);
  EXPECT_EQ(c->plots_size(), 0);
  EXPECT_EQ(c->wrong_elements(), 3);
  EXPECT_EQ(c->spec().sizes_bytes_size(), 1);
}

}  // namespace
}  // namespace benchd::server
