// A sweep through fake workers: one worker Run per cell in order, OOM,
// TIMEOUT and FAILED rows that let the sweep go on, a worker that dies
// mid-cell, cancel mid-sweep, the progress deadline per cell, the stored
// result's bounds.
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/job_test_util.h"
#include "server/jobs/result_bounds.h"

namespace benchd::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A result whose measured step has median `seconds` (10 measured steps).
internal::WorkerEvent ResultEvent(const v1::JobSpec& spec, double seconds, int steps = 0) {
  internal::WorkerEvent e;
  v1::BenchmarkResult* r = e.mutable_result()->mutable_benchmark();
  *r->mutable_spec() = spec.benchmark();
  r->set_device(spec.device());
  r->mutable_step()->set_count(10);
  r->mutable_step()->set_median(seconds);
  r->mutable_step()->set_mean(seconds);
  r->mutable_forward()->set_count(10);
  r->mutable_forward()->set_mean(seconds / 4);
  r->set_tokens_per_second(512 / seconds);
  for (int i = 0; i < steps; ++i) r->add_steps()->set_index(i);
  return e;
}

// Answers each cell by its precision: fp32 10 ms, bf16 4 ms.
RunScript ByPrecision() {
  return [](FakeRun& run) {
    const v1::JobSpec& spec = run.request().spec();
    run.Send(fake::Step(0));
    return fake::Last(
        ResultEvent(spec, spec.benchmark().precision() == v1::PRECISION_BF16 ? 0.004 : 0.010));
  };
}

class SweepJobTest : public JobManagerFixture {
 protected:
  SweepJobTest() : JobManagerFixture({"cpu:0"}) {}

  static v1::JobSpec Sweep(std::vector<std::string> precisions, std::vector<std::string> contexts) {
    v1::JobSpec spec = Benchmark("cpu:0");
    v1::SweepAxis* p = spec.mutable_sweep()->add_axes();
    p->set_field("precision");
    for (auto& v : precisions) p->add_values(v);
    v1::SweepAxis* c = spec.mutable_sweep()->add_axes();
    c->set_field("context_length");
    for (auto& v : contexts) c->add_values(v);
    return spec;
  }
};

TEST_F(SweepJobTest, EachCellIsOneWorkerRunInOrderAndTheRowsAreStreamedAndStored) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  cpu0->SetDefaultRun(ByPrecision());
  StartJobs();
  const v1::JobSpec spec = Sweep({"fp32", "bf16"}, {"16", "32"});
  const std::string id = Submit(spec);
  const v1::Job job = WaitFinal(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error_message();
  // The stored spec keeps the sweep as given.
  EXPECT_EQ(job.spec().sweep().SerializeAsString(), spec.sweep().SerializeAsString());
  EXPECT_EQ(job.kind(), v1::JOB_KIND_BENCHMARK);
  // The worker saw four ordinary requests, resolved, without the sweep.
  const auto runs = cpu0->runs();
  ASSERT_EQ(runs.size(), 4u);
  std::vector<std::string> seen;
  for (const auto& r : runs) {
    EXPECT_FALSE(r.spec().has_sweep());
    EXPECT_EQ(r.spec().device(), "cpu:0");
    EXPECT_EQ(r.spec().progress_timeout_seconds(), job.spec().progress_timeout_seconds());
    EXPECT_EQ(r.spec().benchmark().batch_size(), 4);
    seen.push_back(absl::StrCat(v1::Precision_Name(r.spec().benchmark().precision()), "/",
                                r.spec().benchmark().context_length()));
  }
  EXPECT_THAT(seen, ElementsAre("PRECISION_FP32/16", "PRECISION_FP32/32", "PRECISION_BF16/16",
                                "PRECISION_BF16/32"));
  // Before each cell, every model resident on the device was evicted.
  const auto evictions = cpu0->evict_model.requests();
  ASSERT_EQ(evictions.size(), 4u);
  for (const auto& r : evictions) {
    EXPECT_EQ(r.device(), "cpu:0");
    EXPECT_TRUE(r.key().empty());
  }
  const v1::SweepResult& sweep = job.result().sweep();
  EXPECT_FALSE(job.result().has_benchmark());
  EXPECT_THAT(sweep.fields(), ElementsAre("precision", "context_length"));
  EXPECT_EQ(sweep.cells_total(), 4);
  EXPECT_EQ(sweep.cells_ok(), 4);
  ASSERT_EQ(sweep.cells_size(), 4);
  const v1::SweepCell& bf16 = sweep.cells(3);
  EXPECT_EQ(bf16.index(), 3);
  EXPECT_THAT(bf16.values(), ElementsAre("bf16", "32"));
  EXPECT_EQ(bf16.outcome(), v1::SWEEP_CELL_OUTCOME_OK);
  EXPECT_EQ(bf16.spec().benchmark().context_length(), 32);
  EXPECT_DOUBLE_EQ(bf16.result().benchmark().step().median(), 0.004);
  EXPECT_DOUBLE_EQ(bf16.speedup_vs_fp32(), 2.5);
  EXPECT_DOUBLE_EQ(bf16.forward_share(), 0.25);
  EXPECT_GT(bf16.wall_seconds(), 0);
  // One sweep_cell event per cell, in order, before the result.
  std::vector<int> streamed;
  for (const auto& e : History(id)) {
    if (e.has_sweep_cell()) streamed.push_back(e.sweep_cell().index());
  }
  EXPECT_THAT(streamed, ElementsAre(0, 1, 2, 3));
}

TEST_F(SweepJobTest, OutOfMemoryFailedAndTimedOutCellsAreRowsAndTheSweepGoesOn) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  cpu0->QueueRun(ByPrecision());
  cpu0->QueueRun(fake::Stream({}, fake::Failure(absl::StatusCode::kResourceExhausted,
                                                "out of memory on cpu:0 while building model")));
  cpu0->QueueRun(fake::UntilCancelled({fake::Step(0)}));  // hangs: the cell's limit cancels it
  cpu0->QueueRun(fake::Stream({}, fake::Failure(absl::StatusCode::kInvalidArgument, "no")));
  cpu0->SetDefaultRun(ByPrecision());
  StartJobs();
  v1::JobSpec spec = Sweep({"fp32", "bf16"}, {"16", "32", "64"});
  spec.mutable_sweep()->set_cell_timeout_seconds(1);
  const v1::Job job = WaitFinal(Submit(spec));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error_message();
  const v1::SweepResult& s = job.result().sweep();
  ASSERT_EQ(s.cells_size(), 6);
  EXPECT_EQ(s.cells(0).outcome(), v1::SWEEP_CELL_OUTCOME_OK);
  EXPECT_EQ(s.cells(1).outcome(), v1::SWEEP_CELL_OUTCOME_OUT_OF_MEMORY);
  EXPECT_EQ(s.cells(1).error_code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(s.cells(1).error_message(), "out of memory on cpu:0 while building model");
  EXPECT_FALSE(s.cells(1).has_result());
  EXPECT_EQ(s.cells(1).spec().benchmark().context_length(), 32);  // what it tried
  EXPECT_EQ(s.cells(2).outcome(), v1::SWEEP_CELL_OUTCOME_TIMEOUT);
  EXPECT_EQ(s.cells(2).error_code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(s.cells(2).error_message(),
            "still running after its time limit of 1 s (sweep.cell_timeout_seconds); cancelled");
  EXPECT_GE(s.cells(2).wall_seconds(), 1.0);
  EXPECT_EQ(s.cells(3).outcome(), v1::SWEEP_CELL_OUTCOME_FAILED);
  EXPECT_EQ(s.cells(4).outcome(), v1::SWEEP_CELL_OUTCOME_OK);
  EXPECT_EQ(s.cells(5).outcome(), v1::SWEEP_CELL_OUTCOME_OK);
  EXPECT_EQ(s.cells_ok(), 3);
  EXPECT_EQ(s.cells_out_of_memory(), 1);
  EXPECT_EQ(s.cells_timeout(), 1);
  EXPECT_EQ(s.cells_failed(), 1);
  EXPECT_EQ(cpu0->cancels_seen(), 1);
  // The bf16 cells' fp32 partners ran out of memory (32) or timed out (64):
  // no speed-up without one; bf16 at 16 failed itself.
  EXPECT_DOUBLE_EQ(s.cells(0).speedup_vs_fp32(), 1.0);
  EXPECT_FALSE(s.cells(4).has_speedup_vs_fp32());
  EXPECT_FALSE(s.cells(5).has_speedup_vs_fp32());
  EXPECT_TRUE(s.cells(5).has_median_step_seconds());
  EXPECT_FALSE(s.cells(3).has_speedup_vs_fp32());
  EXPECT_TRUE(workers_.kills().empty());  // the timed-out worker answered its ping
}

// An eviction the worker refuses is said in the job's log; the cell runs.
TEST_F(SweepJobTest, ACellRunsWhenTheEvictionBeforeItFails) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  cpu0->SetDefaultRun(ByPrecision());
  cpu0->evict_model.Fail(absl::UnavailableError("worker busy"));
  StartJobs();
  const std::string id = Submit(Sweep({"fp32", "bf16"}, {"16"}));
  const v1::Job job = WaitFinal(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error_message();
  EXPECT_EQ(job.result().sweep().cells_ok(), 2);
  int said = 0;
  for (const auto& e : History(id)) {
    if (e.has_log() && absl::StrContains(e.log(), "could not be evicted first (worker busy)"))
      ++said;
  }
  EXPECT_EQ(said, 2);
}

TEST_F(SweepJobTest, EveryCellFailingFailsTheJobWithItsRows) {
  workers_.UpAll();
  workers_.client("cpu:0")->SetDefaultRun(
      fake::Stream({}, fake::Failure(absl::StatusCode::kResourceExhausted, "out of memory")));
  StartJobs();
  const v1::Job job = WaitFinal(Submit(Sweep({"fp32", "bf16"}, {"16"})));
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.error_code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(job.error_message(),
            "every cell of the sweep failed (2 out of memory, 0 timed out, 0 failed; the rows say "
            "why); cell 0 (precision=fp32, context_length=16): out of memory");
  EXPECT_EQ(job.result().sweep().cells_size(), 2);
}

TEST_F(SweepJobTest, CancelStopsTheRunningCellAndKeepsTheFinishedOnes) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  Gate started;
  cpu0->QueueRun(ByPrecision());
  cpu0->QueueRun(fake::UntilCancelled({fake::Step(0)}, &started));
  StartJobs();
  const std::string id = Submit(Sweep({"fp32", "bf16"}, {"16", "32"}));
  ASSERT_TRUE(started.Wait());
  ASSERT_TRUE(jobs_->Cancel(id).ok());
  const v1::Job job = WaitFinal(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(job.error_message(),
            "cancelled while running; the worker stops at its next step (cell 1: "
            "precision=fp32, context_length=32); the 1 finished cells of 4 are kept");
  ASSERT_EQ(job.result().sweep().cells_size(), 1);
  EXPECT_EQ(job.result().sweep().cells_total(), 4);
  EXPECT_EQ(cpu0->runs().size(), 2u);  // no cell started after the cancel
}

// A worker that dies mid-cell: the row says so, the next cell waits for the
// restarted worker. A cell with no progress for the job's deadline has its
// worker killed, is a FAILED row, and the sweep goes on too.
TEST_F(SweepJobTest, AWorkerThatDiesOrStallsMidCellIsARowAndTheSweepGoesOnAfterItsRestart) {
  workers_.UpAll();
  auto first = workers_.client("cpu:0");
  first->QueueRun([this](FakeRun& run) {
    run.Send(fake::Step(0));
    workers_.Exit("cpu:0", "killed by signal 9 (SIGKILL: Killed)");
    return fake::Broken(absl::UnavailableError("Socket closed"));
  });
  StartJobs();
  v1::JobSpec spec = Sweep({"fp32"}, {"16", "32", "64"});
  spec.set_progress_timeout_seconds(1);
  const std::string id = Submit(spec);
  ASSERT_TRUE(first->WaitForRunsDone(1));
  auto second = workers_.Up("cpu:0");
  second->QueueRun(fake::UntilCancelled({fake::Step(0)}));  // stalls: killed after 1 s
  std::thread restart([&] {
    // The progress deadline kills the second incarnation; bring a third.
    // Bounded well past the 1 s deadline: on a loaded CI machine the kill
    // once came more than 4 s after the first cell ended.
    for (int i = 0; i < 3000 && workers_.kills().empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    auto third = workers_.Up("cpu:0");
    third->SetDefaultRun(ByPrecision());
  });
  const v1::Job job = WaitFinal(id);
  restart.join();
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error_message();
  const v1::SweepResult& s = job.result().sweep();
  ASSERT_EQ(s.cells_size(), 3);
  EXPECT_EQ(s.cells(0).outcome(), v1::SWEEP_CELL_OUTCOME_FAILED);
  EXPECT_EQ(s.cells(0).error_code(), static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_THAT(s.cells(0).error_message(),
              HasSubstr("died while running this job: killed by signal 9"));
  EXPECT_THAT(s.cells(0).error_message(), HasSubstr("it is being restarted"));
  EXPECT_EQ(s.cells(1).outcome(), v1::SWEEP_CELL_OUTCOME_FAILED);
  EXPECT_EQ(s.cells(1).error_code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(s.cells(1).error_message(), HasSubstr("no progress for 1 s"));
  EXPECT_EQ(s.cells(2).outcome(), v1::SWEEP_CELL_OUTCOME_OK);
  EXPECT_THAT(workers_.kills(), ElementsAre(HasSubstr("made no progress for 1 s")));
}

// The RUNNING job is stored with its rows after each cell: GetJob shows
// them, and a daemon killed mid-sweep leaves them with the INTERRUPTED job.
TEST_F(SweepJobTest, TheRowsSoFarAreStoredWhileTheSweepRuns) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  Gate started, release;
  cpu0->QueueRun(ByPrecision());
  cpu0->QueueRun([&](FakeRun& run) {
    started.Open();
    if (!release.Wait()) return fake::Broken(absl::InternalError("never released"));
    return ByPrecision()(run);
  });
  StartJobs();
  const std::string id = Submit(Sweep({"fp32", "bf16"}, {"16"}));
  ASSERT_TRUE(started.Wait());
  const v1::Job running = Get(id);
  EXPECT_EQ(running.state(), v1::JOB_STATE_RUNNING);
  ASSERT_EQ(running.result().sweep().cells_size(), 1);
  EXPECT_EQ(running.result().sweep().cells(0).outcome(), v1::SWEEP_CELL_OUTCOME_OK);
  EXPECT_EQ(running.result().sweep().cells_total(), 2);
  release.Open();
  const v1::Job done = WaitFinal(id);
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(done.result().sweep().cells_size(), 2);
}

TEST_F(SweepJobTest, SubmitRefusesABadCellBeforeAnythingRuns) {
  workers_.UpAll();
  StartJobs();
  v1::JobSpec spec = Benchmark("cpu:0");
  v1::SweepAxis* a = spec.mutable_sweep()->add_axes();
  a->set_field("attention");
  a->add_values("math");
  a->add_values("cudnn");  // a CUDA kernel: refused on cpu:0
  auto job = jobs_->Submit(spec);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(job.status().message()),
              HasSubstr("sweep cell 1 (attention=cudnn): benchmark.attention: the cudnn SDPA"));
  EXPECT_TRUE(workers_.client("cpu:0")->runs().empty());
}

TEST_F(SweepJobTest, EachCellKeepsItsFirstStepsAndTheRestGoToItsArtifact) {
  workers_.UpAll();
  workers_.client("cpu:0")->SetDefaultRun([](FakeRun& run) {
    return fake::Last(ResultEvent(run.request().spec(), 0.01, kMaxResultSteps + 5));
  });
  StartJobs(/*collectives=*/true);  // gives the manager an artifacts dir
  const v1::Job job = WaitFinal(Submit(Sweep({"fp32", "bf16"}, {"16"})));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error_message();
  for (int i = 0; i < 2; ++i) {
    const v1::BenchmarkResult& b = job.result().sweep().cells(i).result().benchmark();
    EXPECT_EQ(b.steps_size(), kMaxResultSteps);
    EXPECT_EQ(b.steps_total(), kMaxResultSteps + 5);
    EXPECT_EQ(b.steps_artifact(), absl::StrCat("cell-", i, "-steps.csv"));
    EXPECT_TRUE(std::filesystem::exists(
        absl::StrCat(dir_, "/artifacts/", job.id(), "/cell-", i, "-steps.csv")));
  }
  // The streamed rows carry no steps.
  for (const auto& e : History(job.id())) {
    if (e.has_sweep_cell()) EXPECT_EQ(e.sweep_cell().result().benchmark().steps_size(), 0);
  }
}

}  // namespace
}  // namespace benchd::server
