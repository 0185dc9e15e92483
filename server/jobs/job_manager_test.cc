// JobManager through fake workers: dispatch order, cancel, a worker that
// dies, deadlines of unary calls, stopping. A real Store and EventHub.
#include "server/jobs/job_manager.h"

#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/job_test_util.h"
#include "server/jobs/result_bounds.h"

namespace benchd::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> JobIds(const std::vector<internal::RunRequest>& runs) {
  std::vector<std::string> ids;
  for (const auto& r : runs) ids.push_back(r.job_id());
  return ids;
}

// Waits for `release`, then succeeds.
RunScript SucceedAfter(Gate* started, Gate* release) {
  return [started, release](FakeRun& run) {
    started->Open();
    if (!release->Wait()) return fake::Broken(absl::InternalError("never released"));
    return fake::Last(fake::BenchmarkResult(run.request().spec().device()));
  };
}

class JobManagerTest : public JobManagerFixture {
 protected:
  JobManagerTest() : JobManagerFixture({"cpu:0", "cpu:1"}) {}
};

TEST_F(JobManagerTest, DispatchesEachDevicesJobsInSubmissionOrder) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  auto cpu1 = workers_.client("cpu:1");
  Gate started, release;
  cpu0->QueueRun(SucceedAfter(&started, &release));  // holds cpu:0 while the rest queue
  StartJobs();
  std::vector<std::string> on0, on1;
  on0.push_back(Submit(Benchmark("cpu:0")));
  ASSERT_TRUE(started.Wait());
  for (int i = 0; i < 3; ++i) {
    on1.push_back(Submit(Benchmark("cpu:1")));
    on0.push_back(Submit(Benchmark("cpu:0")));
  }
  // cpu:1 does not wait for cpu:0's job.
  ASSERT_TRUE(cpu1->WaitForRuns(3));
  EXPECT_EQ(cpu0->runs().size(), 1u);
  release.Open();
  for (const auto& id : on0) EXPECT_EQ(WaitFinal(id).state(), v1::JOB_STATE_SUCCEEDED);
  for (const auto& id : on1) EXPECT_EQ(WaitFinal(id).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(JobIds(cpu0->runs()), on0);
  EXPECT_EQ(JobIds(cpu1->runs()), on1);
}

TEST_F(JobManagerTest, PublishesTheWorkersEventsAndStoresTheResult) {
  workers_.UpAll();
  internal::WorkerEvent warmup;  // (not from its own step(): mutable_warmup_step() frees that)
  *warmup.mutable_warmup_step() = fake::Step(0, 0.02).step();
  Gate started, release;
  auto stream = fake::Stream({fake::Log("building tiny"), warmup, fake::Step(1, 0.03)},
                             fake::BenchmarkResult("cpu:0", 0.03));
  workers_.client("cpu:0")->QueueRun([&, stream](FakeRun& run) {
    started.Open();
    if (!release.Wait()) return fake::Broken(absl::InternalError("never released"));
    return stream(run);
  });
  StartJobs();
  const std::string id = Submit(Benchmark("cpu:0"));
  ASSERT_TRUE(started.Wait());
  // Watch live, from its start.
  std::mutex mu;
  std::vector<v1::JobEvent> events;
  auto sub = hub_.Subscribe(id, [&](const v1::JobEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  });
  ASSERT_NE(sub.id, 0u);
  events.insert(events.begin(), sub.history.begin(), sub.history.end());
  release.Open();
  const v1::Job job = WaitFinal(id);
  hub_.Unsubscribe(id, sub.id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error_message();
  EXPECT_EQ(job.result().benchmark().step().median(), 0.03);
  EXPECT_TRUE(job.has_started());
  EXPECT_TRUE(job.has_finished());
  std::vector<v1::JobEvent::EventCase> kinds;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& e : events) kinds.push_back(e.event_case());
  EXPECT_THAT(kinds,
              ElementsAre(v1::JobEvent::kQueued, v1::JobEvent::kStarted, v1::JobEvent::kLog,
                          v1::JobEvent::kWarmupStep, v1::JobEvent::kStep, v1::JobEvent::kResult));
  // The worker got the resolved spec (defaults written out).
  const auto runs = workers_.client("cpu:0")->runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].job_id(), id);
  EXPECT_EQ(runs[0].spec().benchmark().batch_size(), 4);
}

TEST_F(JobManagerTest, WorkerFailureFailsTheJobWithItsCode) {
  workers_.UpAll();
  workers_.client("cpu:0")->QueueRun(fake::Stream(
      {}, fake::Failure(absl::StatusCode::kResourceExhausted, "out of memory on cpu:0")));
  StartJobs();
  const v1::Job job = WaitFinal(Submit(Benchmark("cpu:0")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.error_code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(job.error_message(), "out of memory on cpu:0");
}

TEST_F(JobManagerTest, CancelWhileQueuedNeverReachesTheWorker) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  Gate started, release;
  cpu0->QueueRun(SucceedAfter(&started, &release));
  StartJobs();
  const std::string first = Submit(Benchmark("cpu:0"));
  ASSERT_TRUE(started.Wait());
  const std::string queued = Submit(Benchmark("cpu:0"));
  auto cancelled = jobs_->Cancel(queued);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(cancelled->error_message(), "cancelled before it started");
  const std::string after = Submit(Benchmark("cpu:0"));
  release.Open();
  EXPECT_EQ(WaitFinal(first).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(WaitFinal(after).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(JobIds(cpu0->runs()), ElementsAre(first, after));
  // Cancelling again is refused, naming the state.
  auto again = jobs_->Cancel(queued);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("already ended (cancelled)"));
}

TEST_F(JobManagerTest, CancelWhileRunningCancelsTheWorkerCall) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  Gate started;
  cpu0->QueueRun(fake::UntilCancelled({fake::Step(0)}, &started));
  StartJobs();
  const std::string id = Submit(Benchmark("cpu:0"));
  ASSERT_TRUE(started.Wait());
  auto answer = jobs_->Cancel(id);
  ASSERT_TRUE(answer.ok()) << answer.status();
  const v1::Job job = WaitFinal(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(job.error_message(), "cancelled while running; the worker stops at its next step");
  EXPECT_EQ(cpu0->cancels_seen(), 1);
  // The device is free again.
  EXPECT_EQ(WaitFinal(Submit(Benchmark("cpu:0"))).state(), v1::JOB_STATE_SUCCEEDED);
}

// A job with no progress for its deadline has its worker killed (a stopped
// worker answers nothing else) and fails DEADLINE_EXCEEDED saying what it
// was doing; the deadline it ran under is in its stored spec.
TEST_F(JobManagerTest, NoProgressPastTheDeadlineKillsTheWorkerAndFailsTheJob) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  cpu0->QueueRun(fake::UntilCancelled({fake::Step(0), fake::Step(1)}));
  StartJobs();
  v1::JobSpec spec = Benchmark("cpu:0");
  spec.set_progress_timeout_seconds(1);
  const v1::Job job = WaitFinal(Submit(spec));
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.error_code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(job.error_message(), HasSubstr("no progress for 1 s (the job's progress deadline"));
  EXPECT_THAT(job.error_message(), HasSubstr("after step 2"));
  EXPECT_THAT(job.error_message(), HasSubstr("the worker for cpu:0 (pid 1001) was killed"));
  EXPECT_THAT(workers_.kills(), ElementsAre(HasSubstr("cpu:0 1: job 1 made no progress for 1 s")));
  EXPECT_EQ(job.spec().progress_timeout_seconds(), 1);
}

TEST_F(JobManagerTest, TheDaemonsProgressDeadlineIsWrittenIntoTheSpec) {
  workers_.UpAll();
  StartJobs(/*collectives=*/false, {{"benchmark", 42}});
  const v1::Job job = WaitFinal(Submit(Benchmark("cpu:0")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.spec().progress_timeout_seconds(), 42);
}

// An attention job: queued with every default written out and its kind's
// deadline; what the device cannot run is refused at Submit, naming the field.
TEST_F(JobManagerTest, AnAttentionJobIsResolvedAndCheckedForItsDeviceAtSubmit) {
  workers_.UpAll();
  StartJobs(/*collectives=*/false, {{"attention", 77}});
  v1::JobSpec spec;
  spec.set_device("cpu:1");
  spec.mutable_attention()->set_seq_len(256);
  auto job = jobs_->Submit(spec, "");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->kind(), v1::JOB_KIND_ATTENTION);
  EXPECT_EQ(job->spec().progress_timeout_seconds(), 77);
  EXPECT_EQ(job->spec().attention().batch_size(), 8);
  EXPECT_EQ(job->spec().attention().passes(), 100);
  EXPECT_EQ(job->spec().attention().implementation(), v1::ATTENTION_IMPL_FAITHFUL);
  EXPECT_THAT(job->devices(), ElementsAre("cpu:1"));
  WaitFinal(job->id());  // the fake worker answers; nothing is left running

  spec.mutable_attention()->set_implementation(v1::ATTENTION_IMPL_SDPA_CUDNN);
  auto refused = jobs_->Submit(spec, "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("attention.implementation: the cudnn SDPA backend is a CUDA kernel"));
  spec.mutable_attention()->clear_implementation();
  spec.mutable_attention()->set_memory_cap_bytes(int64_t{1} << 30);
  refused = jobs_->Submit(spec, "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("attention.memory_cap_bytes"));
}

// A precision job: queued with every default written out and its kind's
// deadline; bad input is refused at Submit, naming the field.
TEST_F(JobManagerTest, APrecisionJobIsResolvedAtSubmit) {
  workers_.UpAll();
  StartJobs(/*collectives=*/false, {{"precision", 55}});
  v1::JobSpec spec;
  spec.set_device("cpu:1");
  spec.mutable_precision()->set_count(10);
  auto job = jobs_->Submit(spec, "");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->kind(), v1::JOB_KIND_PRECISION);
  EXPECT_EQ(job->spec().progress_timeout_seconds(), 55);
  EXPECT_EQ(job->spec().precision().count(), 10);
  EXPECT_EQ(job->spec().precision().addend(), 0.01);
  EXPECT_EQ(job->spec().precision().experiments_size(), 2);
  EXPECT_EQ(job->spec().precision().autocast_dtypes_size(), 2);
  EXPECT_THAT(job->devices(), ElementsAre("cpu:1"));
  WaitFinal(job->id());  // the fake worker answers; nothing is left running

  spec.mutable_precision()->add_autocast_dtypes(v1::PRECISION_FP32);
  auto refused = jobs_->Submit(spec, "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("precision.autocast_dtypes[0]: fp32 is not an autocast dtype"));
}

// A cancelled job's worker that does not answer afterwards (stopped, hung)
// would never stop: it is killed; one that answers is left alone.
TEST_F(JobManagerTest, AWorkerSilentAfterACancelIsReplaced) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  for (bool silent : {false, true}) {
    Gate started;
    cpu0->QueueRun(fake::UntilCancelled({fake::Step(0)}, &started));
    if (silent) cpu0->ping.MissDeadline();
    if (!silent) StartJobs();
    const std::string id = Submit(Benchmark("cpu:0"));
    ASSERT_TRUE(started.Wait());
    ASSERT_TRUE(jobs_->Cancel(id).ok());
    EXPECT_EQ(WaitFinal(id).state(), v1::JOB_STATE_CANCELLED);
    ASSERT_TRUE(cpu0->ping.WaitForCalls(silent ? 2 : 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(workers_.kills().size(), silent ? 1u : 0u);
  }
  EXPECT_THAT(workers_.kills(), ElementsAre(HasSubstr("cpu:0 1: it did not answer within 5 s "
                                                      "after job 2 was cancelled")));
}

// SIGTERM's first part: a running job may finish within the grace; nothing
// new starts (queued jobs stay QUEUED for the next start); Submit refuses.
TEST_F(JobManagerTest, DrainLetsTheRunningJobFinishAndStartsNothing) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  Gate started, release;
  cpu0->QueueRun(SucceedAfter(&started, &release));
  StartJobs();
  const std::string running = Submit(Benchmark("cpu:0"));
  ASSERT_TRUE(started.Wait());
  const std::string queued = Submit(Benchmark("cpu:0"));
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    release.Open();
  });
  EXPECT_TRUE(jobs_->Drain(std::chrono::seconds(10)));
  finisher.join();
  EXPECT_EQ(Get(running).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Get(queued).state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(cpu0->runs().size(), 1u);
  EXPECT_EQ(jobs_->Submit(Benchmark("cpu:0")).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(JobManagerTest, AJobStillRunningAfterTheGraceIsInterrupted) {
  workers_.UpAll();
  Gate started;
  workers_.client("cpu:0")->QueueRun(fake::UntilCancelled({fake::Step(0)}, &started));
  StartJobs();
  const std::string running = Submit(Benchmark("cpu:0"));
  ASSERT_TRUE(started.Wait());
  EXPECT_FALSE(jobs_->Drain(std::chrono::milliseconds(200)));
  jobs_->Stop();
  EXPECT_EQ(Get(running).state(), v1::JOB_STATE_INTERRUPTED);
}

TEST_F(JobManagerTest, WorkerThatDiesMidStreamFailsTheJobNamingItAndHowItEnded) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  cpu0->QueueRun([this](FakeRun& run) {
    run.Send(fake::Step(0));
    workers_.Exit("cpu:0", fake::kKilledExit);
    return fake::Broken(absl::UnavailableError("Socket closed"));
  });
  StartJobs();
  const v1::Job job = WaitFinal(Submit(Benchmark("cpu:0")));
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.error_code(), static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_EQ(job.error_message(),
            absl::StrCat("the worker for cpu:0 (pid ", cpu0->pid(),
                         ") died while running this job: ", fake::kKilledExit,
                         "; it is being restarted; its log is /fake/logs/worker-cpu-0.log"));
  // The next job waits for the restarted worker and runs there.
  const std::string next = Submit(Benchmark("cpu:0"));
  auto restarted = workers_.Up("cpu:0");
  EXPECT_EQ(WaitFinal(next).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(JobIds(restarted->runs()), ElementsAre(next));
  EXPECT_EQ(cpu0->runs().size(), 1u);
}

TEST_F(JobManagerTest, JobWaitsForItsWorkerToComeUp) {
  StartJobs();
  const std::string id = Submit(Benchmark("cpu:1"));
  EXPECT_EQ(Get(id).state(), v1::JOB_STATE_QUEUED);
  workers_.Up("cpu:1");
  EXPECT_EQ(WaitFinal(id).state(), v1::JOB_STATE_SUCCEEDED);
}

// --worker-idle-exit: a job for a parked worker starts it, waits for it (its
// start in the job's log events) and holds it until the job ends.
TEST_F(JobManagerTest, AJobStartsAParkedWorkerAndSaysHowLongItTook) {
  workers_.Park("cpu:0", "parked after 60 s idle (--worker-idle-exit 60 s; pid 7 stopped)", [this] {
    std::thread([this] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      workers_.Up("cpu:0");
    }).detach();
  });
  StartJobs();
  // A parked worker accepts jobs.
  const std::string id = Submit(Benchmark("cpu:0"));
  const v1::Job job = WaitFinal(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error_message();
  EXPECT_EQ(workers_.wakes("cpu:0"), 1);
  std::vector<std::string> logs;
  for (const auto& e : History(id)) {
    if (e.has_log()) logs.push_back(e.log());
  }
  ASSERT_GE(logs.size(), 2u);
  EXPECT_THAT(logs[0], HasSubstr("starting the worker for cpu:0 for this job, which waits for it "
                                 "(parked after 60 s idle"));
  EXPECT_THAT(logs[1], ::testing::MatchesRegex("the worker for cpu:0 started in [0-9.]+ s \\(pid "
                                               "[0-9]+\\)"));
  // Released once the job ended (its worker may be parked again).
  for (int i = 0; i < 100 && workers_.holds("cpu:0") > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(workers_.holds("cpu:0"), 0);
}

TEST_F(JobManagerTest, AParkedWorkerThatCannotStartFailsTheJobSayingSo) {
  workers_.Park("cpu:1", "parked after 60 s idle",
                [this] { workers_.FailStarts("cpu:1", "exited with code 1"); });
  StartJobs();
  const std::string id = Submit(Benchmark("cpu:1"));
  const v1::Job job = WaitFinal(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.error_code(), static_cast<int>(absl::StatusCode::kUnavailable));
  EXPECT_EQ(job.error_message(),
            "the worker for cpu:1 was parked (--worker-idle-exit) and did not start again for "
            "this job: exited with code 1; see /fake/logs/worker-cpu-1.log");
}

TEST_F(JobManagerTest, StopInterruptsRunningJobsAndKeepsQueuedOnes) {
  workers_.UpAll();
  auto cpu0 = workers_.client("cpu:0");
  Gate started;
  cpu0->QueueRun(fake::UntilCancelled({}, &started));
  StartJobs();
  const std::string running = Submit(Benchmark("cpu:0"));
  ASSERT_TRUE(started.Wait());
  const std::string queued = Submit(Benchmark("cpu:0"));
  jobs_->Stop();
  const v1::Job job = Get(running);
  EXPECT_EQ(job.state(), v1::JOB_STATE_INTERRUPTED);
  EXPECT_EQ(job.error_code(), static_cast<int>(absl::StatusCode::kAborted));
  EXPECT_EQ(job.error_message(), "the daemon stopped while this job was running");
  EXPECT_EQ(cpu0->cancels_seen(), 1);
  EXPECT_EQ(Get(queued).state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(cpu0->runs().size(), 1u);
  auto refused = jobs_->Submit(Benchmark("cpu:0"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
}

// A job that ends while the store cannot take its record (a full disk):
// nobody is told it is done until it is stored; then it is, once.
TEST_F(JobManagerTest, AResultTheStoreRefusesIsAnnouncedOnlyOnceStored) {
  workers_.UpAll();
  Gate started, release;
  workers_.client("cpu:0")->QueueRun([&](FakeRun&) {
    started.Open();
    if (!release.Wait()) return fake::Broken(absl::InternalError("never released"));
    internal::WorkerEvent result = fake::BenchmarkResult("cpu:0", 0.02);
    result.mutable_result()->mutable_benchmark()->set_device_name(std::string(300000, 'x'));
    return fake::Last(result);
  });
  StartJobs();
  const std::string id = Submit(Benchmark("cpu:0"));
  ASSERT_TRUE(started.Wait());
  std::atomic<int> terminal{0};
  auto sub = hub_.Subscribe(id, [&](const v1::JobEvent& e) { terminal += IsTerminal(e); });
  ASSERT_NE(sub.id, 0u);
  ASSERT_TRUE(store_->LimitPagesForTesting(1).ok());  // the disk fills
  release.Open();
  std::string pending;
  for (int i = 0; i < 500 && pending.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    pending = jobs_->Get(id)->result_pending();
  }
  EXPECT_THAT(pending, HasSubstr("ended succeeded"));
  EXPECT_THAT(pending, HasSubstr(dir_));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(terminal, 0);
  EXPECT_EQ(jobs_->Get(id)->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(jobs_->Cancel(id).status().code(), absl::StatusCode::kFailedPrecondition);
  // Reads go on; a new job is refused naming the data dir.
  EXPECT_TRUE(jobs_->List(JobFilter(), 10, 0).ok());
  absl::StatusOr<v1::Job> refused;
  refused = jobs_->Submit(Benchmark("cpu:1"));
  for (int i = 0; i < 200 && refused.ok(); ++i) refused = jobs_->Submit(Benchmark("cpu:1"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr(absl::StrCat("the data dir '", dir_, "'")));

  ASSERT_TRUE(store_->LimitPagesForTesting(0).ok());  // space again
  const v1::Job job = WaitFinal(id);
  hub_.Unsubscribe(id, sub.id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.result().benchmark().device_name().size(), 300000u);
  EXPECT_EQ(terminal, 1);
  EXPECT_EQ(jobs_->Get(id)->result_pending(), "");
}

TEST_F(JobManagerTest, ListAnswersSummariesAndGetTheWholeJob) {
  workers_.UpAll();
  internal::WorkerEvent result = fake::BenchmarkResult("cpu:0", 0.02);
  for (int i = 0; i < 10; ++i) result.mutable_result()->mutable_benchmark()->add_steps();
  workers_.client("cpu:0")->QueueRun(fake::Stream({}, result));
  StartJobs();
  const std::string id = Submit(Benchmark("cpu:0"));
  ASSERT_EQ(WaitFinal(id).state(), v1::JOB_STATE_SUCCEEDED);
  auto page = jobs_->List(JobFilter(), 10, 0);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->jobs.size(), 1u);
  EXPECT_TRUE(page->jobs[0].summary());
  EXPECT_EQ(page->jobs[0].result().benchmark().steps_size(), 0);
  EXPECT_EQ(page->jobs[0].result().benchmark().step().median(), 0.02);
  const v1::Job whole = *jobs_->Get(id);
  EXPECT_FALSE(whole.summary());
  EXPECT_EQ(whole.result().benchmark().steps_size(), 10);
}

// More steps than a result keeps: the first ones stay, every one goes to the
// job's steps.csv, and the terminal event carries the cut result.
TEST_F(JobManagerTest, ALongRunsStepsBeyondTheBoundGoToAnArtifact) {
  workers_.UpAll();
  internal::WorkerEvent result = fake::BenchmarkResult("cpu:0", 0.02);
  for (int i = 0; i < kMaxResultSteps + 500; ++i) {
    result.mutable_result()->mutable_benchmark()->add_steps()->set_index(i);
  }
  workers_.client("cpu:0")->QueueRun(fake::Stream({}, result));
  StartJobs(/*collectives=*/true);  // gives the manager its artifacts dir
  const std::string id = Submit(Benchmark("cpu:0"));
  const v1::Job job = WaitFinal(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.result().benchmark().steps_size(), kMaxResultSteps);
  EXPECT_EQ(job.result().benchmark().steps_total(), kMaxResultSteps + 500);
  EXPECT_EQ(job.result().benchmark().steps_artifact(), "steps.csv");
  EXPECT_TRUE(std::filesystem::exists(absl::StrCat(dir_, "/artifacts/", id, "/steps.csv")));
}

}  // namespace
}  // namespace benchd::server
