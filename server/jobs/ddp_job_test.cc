// The data-parallel job through JobManager and GroupRegistry over fake
// workers: rows from every rank as each run ends, exposed communication
// against the compute-only run, ranks that diverge, the batch split, a
// member that dies. (The real training is worker/ddp's, and tests/integration
// runs it end to end on CPU workers.)
#include "server/jobs/ddp_job.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/job_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/job_test_util.h"

namespace benchd::server {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

internal::WorkerEvent RankRun(int run, int rank, std::vector<double> steps, double sum = 1.5,
                              int64_t calls = 0) {
  internal::WorkerEvent e;
  internal::DdpRankRun* r = e.mutable_ddp_run();
  r->set_run(run);
  r->mutable_rank()->set_rank(rank);
  r->mutable_rank()->set_device(absl::StrCat("cpu:", rank));
  r->mutable_rank()->set_peak_memory_bytes(1000 * (rank + 1));
  r->mutable_rank()->set_optimizer_state_bytes(800 / (rank + 1));
  for (double s : steps) r->add_step_seconds(s);
  r->set_calls_per_step(calls);
  r->set_bytes_per_step(calls * 40);
  r->set_parameter_sum(sum);
  r->set_parameter_sum_sq(2.5);
  r->set_loss(4.0 + rank);
  r->set_timer("host_steady_clock");
  r->set_parameter_count(100);
  r->set_device_name("fake cpu");
  return e;
}

internal::WorkerEvent DdpResult() {
  internal::WorkerEvent e;
  e.mutable_result()->mutable_ddp()->mutable_versions()->set_torch("fake-torch");
  return e;
}

class DdpJobTest : public JobManagerFixture {
 protected:
  DdpJobTest() : JobManagerFixture({"cpu:0", "cpu:1", "cpu:2"}) {}

  void SetUp() override {
    JobManagerFixture::SetUp();
    workers_.UpAll();
    StartJobs(/*collectives=*/true);
  }

  // Flat then bucketed 25 MB on cpu:0 and cpu:1.
  static v1::JobSpec Spec() {
    v1::JobSpec spec;
    v1::DdpSpec* d = spec.mutable_ddp();
    d->mutable_target()->add_devices("cpu:0");
    d->mutable_target()->add_devices("cpu:1");
    d->mutable_step()->mutable_model()->set_preset("tiny");
    d->mutable_step()->set_warmup_steps(0);
    d->mutable_step()->set_measure_steps(2);
    d->add_variants(v1::DDP_VARIANT_FLAT);
    d->add_variants(v1::DDP_VARIANT_BUCKETED);
    d->add_bucket_mb(25);
    return spec;
  }
};

TEST_F(DdpJobTest, RowsTakeTheSlowestRankAndExposedCommIsAgainstComputeOnly) {
  workers_.client("cpu:0")->QueueRun(fake::Stream(
      {RankRun(0, 0, {1.0, 3.0}), RankRun(1, 0, {4.0, 4.0}, 1.5, 1), RankRun(2, 0, {3.0, 3.5})},
      DdpResult()));
  workers_.client("cpu:1")->QueueRun(fake::Stream(
      {RankRun(0, 1, {2.0, 1.0}), RankRun(1, 1, {5.0, 3.0}, 1.5, 1), RankRun(2, 1, {3.0, 3.0})},
      DdpResult()));
  const std::string id = Submit(Spec());
  const v1::Job job = WaitFinal(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error_message();
  EXPECT_EQ(job.kind(), v1::JOB_KIND_DDP);
  EXPECT_THAT(job.devices(), ElementsAre("cpu:0", "cpu:1"));
  const v1::DdpResult& r = job.result().ddp();
  EXPECT_EQ(r.world_size(), 2);
  EXPECT_EQ(r.global_batch_size(), 8);
  EXPECT_EQ(r.spec().step().batch_size(), 4);  // per rank
  EXPECT_EQ(r.parameter_count(), 100);
  EXPECT_EQ(r.timer(), "host_steady_clock");
  EXPECT_EQ(r.versions().torch(), "fake-torch");
  EXPECT_TRUE(r.group().transient());
  EXPECT_THAT(r.compute_only().step_seconds(), ElementsAre(2.0, 3.0));
  EXPECT_DOUBLE_EQ(r.compute_only().step().median(), 2.5);
  EXPECT_FALSE(r.compute_only().ranks_agree());  // not compared: each rank trains apart
  ASSERT_EQ(r.rows_size(), 2);
  const v1::DdpRow& flat = r.rows(0);
  EXPECT_EQ(flat.variant(), v1::DDP_VARIANT_FLAT);
  EXPECT_THAT(flat.step_seconds(), ElementsAre(5.0, 4.0));
  EXPECT_DOUBLE_EQ(flat.exposed_comm_seconds(), 4.5 - 2.5);
  EXPECT_THAT(flat.exposed_comm_fraction(), DoubleNear(2.0 / 4.5, 1e-12));
  EXPECT_EQ(flat.calls_per_step(), 1);
  EXPECT_EQ(flat.bytes_per_step(), 40);
  EXPECT_TRUE(flat.ranks_agree());
  EXPECT_EQ(flat.peak_memory_bytes(), 2000);               // the largest rank's
  EXPECT_EQ(flat.optimizer_state_bytes(), 800);            // the largest rank's
  EXPECT_EQ(flat.unsharded_optimizer_state_bytes(), 800);  // 8 bytes x 100 parameters
  EXPECT_EQ(flat.loss(), 4.0);                             // rank 0's
  ASSERT_EQ(flat.ranks_size(), 2);
  EXPECT_EQ(flat.ranks(1).device(), "cpu:1");
  EXPECT_EQ(r.rows(1).variant(), v1::DDP_VARIANT_BUCKETED);
  EXPECT_EQ(r.rows(1).bucket_mb(), 25);
  EXPECT_THAT(r.rows(1).step_seconds(), ElementsAre(3.0, 3.5));
  // Both members got their part on the one group.
  std::string group;
  for (const char* d : {"cpu:0", "cpu:1"}) {
    const auto runs = workers_.client(d)->runs();
    ASSERT_EQ(runs.size(), 1u) << d;
    EXPECT_FALSE(runs[0].ddp().group().empty());
    EXPECT_EQ(runs[0].spec().ddp().step().batch_size(), 4);
    if (group.empty()) group = runs[0].ddp().group();
    EXPECT_EQ(runs[0].ddp().group(), group);
  }
  EXPECT_TRUE(workers_.client("cpu:2")->runs().empty());
  // The transient group was dropped after the job.
  EXPECT_FALSE(groups_->Get(group).ok());
}

TEST_F(DdpJobTest, RanksThatDivergeFailTheJobKeepingTheRows) {
  workers_.client("cpu:0")->QueueRun(fake::Stream(
      {RankRun(0, 0, {1.0, 1.0}), RankRun(1, 0, {2.0, 2.0}, 1.5), RankRun(2, 0, {2.0, 2.0})},
      DdpResult()));
  workers_.client("cpu:1")->QueueRun(fake::Stream(
      {RankRun(0, 1, {1.0, 1.0}), RankRun(1, 1, {2.0, 2.0}, 1.25), RankRun(2, 1, {2.0, 2.0})},
      DdpResult()));
  const v1::Job job = WaitFinal(Submit(Spec()));
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.error_code(), static_cast<int>(absl::StatusCode::kInternal));
  EXPECT_EQ(job.error_message(),
            "the ranks' parameters differ after run 1 (flat): their sums are [1.5, 1.25]; every "
            "rank must hold the same parameters after averaged gradients");
  ASSERT_EQ(job.result().ddp().rows_size(), 2);
  EXPECT_FALSE(job.result().ddp().rows(0).ranks_agree());
  EXPECT_TRUE(job.result().ddp().rows(1).ranks_agree());
}

TEST_F(DdpJobTest, AMemberThatDiesBreaksTheGroupNamingIt) {
  // Both ranks send the compute-only row before rank 1 dies (a rank whose
  // call starts after the group's calls were cancelled would send nothing),
  // and rank 0 fails (its peer is gone) only after that.
  Gate rank0_sent, rank1_sent;
  workers_.client("cpu:0")->QueueRun([&](FakeRun& run) {
    run.Send(RankRun(0, 0, {1.0, 1.0}));
    rank0_sent.Open();
    rank1_sent.Wait();
    return fake::Last(fake::Failure(absl::StatusCode::kAborted, "peer"));
  });
  workers_.client("cpu:1")->QueueRun([&](FakeRun& run) {
    rank0_sent.Wait();
    run.Send(RankRun(0, 1, {1.0, 1.0}));
    rank1_sent.Open();
    workers_.Exit("cpu:1", "killed by signal 9 (SIGKILL: Killed)");
    return fake::Broken(absl::UnavailableError("Socket closed"));
  });
  const v1::Job job = WaitFinal(Submit(Spec()));
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(job.error_message(),
              HasSubstr("the worker for cpu:1 (rank 1, pid 1101) killed by signal 9 (SIGKILL: "
                        "Killed) during data-parallel training"));
  // The compute-only run had finished on both ranks: its row is kept.
  EXPECT_THAT(job.result().ddp().compute_only().step_seconds(), ElementsAre(1.0, 1.0));
}

TEST_F(DdpJobTest, SubmitNamesABatchThatDoesNotSplitOverTheGroup) {
  v1::CreateGroupRequest req;
  for (const char* d : {"cpu:0", "cpu:1", "cpu:2"}) req.add_devices(d);
  req.set_backend(v1::COLLECTIVE_BACKEND_GLOO);
  auto group = groups_->Create(req);
  ASSERT_TRUE(group.ok()) << group.status();
  v1::JobSpec spec = Spec();
  spec.mutable_ddp()->mutable_target()->clear_devices();
  spec.mutable_ddp()->mutable_target()->set_group(group->id());
  auto refused = jobs_->Submit(spec, "");
  EXPECT_EQ(refused.status().message(),
            "ddp.global_batch_size: 8 does not split evenly over 3 ranks; expected a multiple of "
            "3 (or give ddp.step.batch_size, the batch of each rank)");
  // Resolved against the group's three ranks.
  auto resolved = ResolveJobSpec(spec);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  resolved->mutable_ddp()->set_global_batch_size(9);
  auto devices = DdpJobDevices(resolved->mutable_ddp(), groups_.get(), {"cpu:0", "cpu:1", "cpu:2"});
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_THAT(*devices, ElementsAre("cpu:0", "cpu:1", "cpu:2"));
  EXPECT_EQ(resolved->ddp().step().batch_size(), 3);

  spec.mutable_ddp()->mutable_target()->set_group("nope");
  EXPECT_EQ(jobs_->Submit(spec, "").status().code(), absl::StatusCode::kNotFound);
  v1::JobSpec served = Spec();
  served.mutable_ddp()->mutable_target()->set_devices(1, "cpu:7");
  EXPECT_THAT(std::string(jobs_->Submit(served, "").status().message()),
              HasSubstr("ddp.target.devices"));
}

}  // namespace
}  // namespace benchd::server
