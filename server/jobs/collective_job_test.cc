// The collective job through JobManager and GroupRegistry over fake workers:
// rows from every rank, a member that dies, a cancel, ranks that disagree.
#include "server/jobs/collective_job.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/job_test_util.h"

namespace benchd::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CollectiveJobTest : public JobManagerFixture {
 protected:
  CollectiveJobTest() : JobManagerFixture({"cpu:0", "cpu:1", "cpu:2"}) {}

  void SetUp() override {
    JobManagerFixture::SetUp();
    workers_.UpAll();
    StartJobs(/*collectives=*/true);
  }

  v1::Group MakeGroup(std::vector<std::string> devices) {
    v1::CreateGroupRequest req;
    for (auto& d : devices) req.add_devices(d);
    req.set_backend(v1::COLLECTIVE_BACKEND_GLOO);
    req.set_timeout_seconds(30);
    auto group = groups_->Create(req);
    EXPECT_TRUE(group.ok()) << group.status();
    return group.ok() ? *group : v1::Group();
  }

  static v1::JobSpec OnGroup(const std::string& group, std::vector<int64_t> sizes) {
    v1::JobSpec spec;
    v1::CollectiveSpec* c = spec.mutable_collective();
    c->set_group(group);
    for (int64_t s : sizes) c->add_sizes_bytes(s);
    c->set_warmup_iters(0);
    c->set_iters(2);
    return spec;
  }
};

TEST_F(CollectiveJobTest, RowsAggregateEveryRankAsEachSizeCompletes) {
  const v1::Group group = MakeGroup({"cpu:0", "cpu:1"});
  // Rank 0 waits until the test watches (a finished job's history is dropped).
  Gate watching;
  auto rank0 = fake::Stream(
      {fake::RankSize(0, 1024, {1.0, 3.0}, 0, 256), fake::RankSize(0, 4096, {4.0, 4.0})},
      fake::CollectiveResult());
  workers_.client("cpu:0")->QueueRun([&, rank0](FakeRun& run) {
    if (!watching.Wait()) return fake::Broken(absl::InternalError("nobody watched"));
    return rank0(run);
  });
  workers_.client("cpu:1")->QueueRun(fake::Stream(
      {fake::RankSize(1, 1024, {2.0, 1.0}, 1, 256), fake::RankSize(1, 4096, {5.0, 3.0})},
      fake::CollectiveResult()));
  const std::string id = Submit(OnGroup(group.id(), {1024, 4096}));
  std::atomic<int> rows{0};
  auto sub = hub_.Subscribe(id, [&](const v1::JobEvent& e) { rows += e.has_collective_row(); });
  ASSERT_NE(sub.id, 0u);
  watching.Open();
  const v1::Job job = WaitFinal(id);
  hub_.Unsubscribe(id, sub.id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error_message();
  EXPECT_THAT(job.devices(), ElementsAre("cpu:0", "cpu:1"));
  const v1::CollectiveResult& result = job.result().collective();
  ASSERT_EQ(result.rows_size(), 2);
  const v1::CollectiveRow& small = result.rows(0);
  EXPECT_EQ(small.size_bytes(), 1024);
  EXPECT_THAT(small.iteration_seconds(), ElementsAre(2.0, 3.0));  // the slowest rank each time
  EXPECT_EQ(small.wrong_elements(), 1);
  EXPECT_EQ(small.checked_elements(), 512);
  EXPECT_EQ(small.group(), group.id());
  EXPECT_THAT(small.devices(), ElementsAre("cpu:0", "cpu:1"));
  EXPECT_THAT(result.rows(1).iteration_seconds(), ElementsAre(5.0, 4.0));
  EXPECT_EQ(result.wrong_elements(), 1);
  EXPECT_EQ(result.versions().torch(), "fake-torch");
  ASSERT_EQ(result.groups_size(), 1);
  EXPECT_TRUE(result.groups(0).was_resident());
  // Each row went out as it completed.
  EXPECT_EQ(rows, 2);
  // Both members ran their part on the group.
  for (const char* d : {"cpu:0", "cpu:1"}) {
    const auto runs = workers_.client(d)->runs();
    ASSERT_EQ(runs.size(), 1u) << d;
    EXPECT_EQ(runs[0].collective().group(), group.id());
    EXPECT_THAT(runs[0].collective().sizes_bytes(), ElementsAre(1024, 4096));
    EXPECT_EQ(runs[0].collective().timeout_seconds(), 30);
  }
  EXPECT_TRUE(workers_.client("cpu:2")->runs().empty());
  auto after = groups_->Get(group.id());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->jobs_run(), 1);
  EXPECT_EQ(after->state(), v1::GROUP_STATE_READY);
}

TEST_F(CollectiveJobTest, MemberThatDiesBreaksTheGroupNamingRankAndDevice) {
  const v1::Group group = MakeGroup({"cpu:0", "cpu:1"});
  auto rank0 = workers_.client("cpu:0");
  auto rank1 = workers_.client("cpu:1");
  // Both ranks finish the first size, then rank 1's worker dies.
  Gate rank0_sent;
  rank0->QueueRun(fake::UntilCancelled({fake::RankSize(0, 1024, {1.0, 1.0})}, &rank0_sent));
  rank1->QueueRun([this, &rank0_sent](FakeRun& run) {
    run.Send(fake::RankSize(1, 1024, {1.0, 1.0}));
    if (!rank0_sent.Wait()) return fake::Broken(absl::InternalError("rank 0 never sent"));
    workers_.Exit("cpu:1", fake::kKilledExit);
    return fake::Broken();
  });
  const v1::Job job = WaitFinal(Submit(OnGroup(group.id(), {1024, 4096})));
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.error_code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  const std::string who = absl::StrCat("the worker for cpu:1 (rank 1, pid ", rank1->pid(), ") ");
  EXPECT_THAT(job.error_message(), HasSubstr(absl::StrCat("group ", group.id(), " ")));
  EXPECT_THAT(job.error_message(), HasSubstr(who + fake::kKilledExit));
  // The size that completed on every rank is kept.
  EXPECT_EQ(job.result().collective().rows_size(), 1);
  // The survivor's call was cancelled, and it dropped the group.
  EXPECT_EQ(rank0->cancels_seen(), 1);
  ASSERT_TRUE(rank0->leave_group.WaitForCalls(1));
  EXPECT_EQ(rank0->leave_group.requests()[0].group(), group.id());
  EXPECT_TRUE(rank0->leave_group.requests()[0].abort());
  auto broken = groups_->Get(group.id());
  ASSERT_TRUE(broken.ok());
  EXPECT_EQ(broken->state(), v1::GROUP_STATE_BROKEN);
  EXPECT_EQ(broken->broken_reason(), who + fake::kKilledExit);
  // Later jobs on it are refused at Submit, saying why.
  auto refused = jobs_->Submit(OnGroup(group.id(), {1024}));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr(fake::kKilledExit));
}

TEST_F(CollectiveJobTest, CancelStopsEveryMember) {
  const v1::Group group = MakeGroup({"cpu:1", "cpu:2"});
  Gate started1, started2;
  workers_.client("cpu:1")->QueueRun(fake::UntilCancelled({}, &started1));
  workers_.client("cpu:2")->QueueRun(fake::UntilCancelled({}, &started2));
  const std::string id = Submit(OnGroup(group.id(), {1024}));
  ASSERT_TRUE(started1.Wait());
  ASSERT_TRUE(started2.Wait());
  ASSERT_TRUE(jobs_->Cancel(id).ok());
  const v1::Job job = WaitFinal(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(job.error_message(), "cancelled while running");
  EXPECT_EQ(workers_.client("cpu:1")->cancels_seen(), 1);
  EXPECT_EQ(workers_.client("cpu:2")->cancels_seen(), 1);
  // A cancel is not the group's fault.
  EXPECT_EQ(groups_->Get(group.id())->state(), v1::GROUP_STATE_READY);
}

TEST_F(CollectiveJobTest, RanksThatDisagreeFailTheJobAndBreakTheGroup) {
  const v1::Group group = MakeGroup({"cpu:0", "cpu:1"});
  auto rank0 = workers_.client("cpu:0");
  rank0->QueueRun(fake::Stream({fake::RankSize(0, 1024, {1.0, 1.0})}, fake::CollectiveResult()));
  // Rank 1's three iterations against rank 0's two come last, once rank 0
  // has finished (so nothing else ends the job).
  workers_.client("cpu:1")->QueueRun([rank0](FakeRun& run) {
    if (!rank0->WaitForRunsDone(1)) return fake::Broken(absl::InternalError("rank 0 never ended"));
    run.Send(fake::RankSize(1, 1024, {1.0, 1.0, 1.0}));
    return fake::Last(fake::CollectiveResult());
  });
  const v1::Job job = WaitFinal(Submit(OnGroup(group.id(), {1024})));
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.error_code(), static_cast<int>(absl::StatusCode::kInternal));
  EXPECT_THAT(job.error_message(), HasSubstr(absl::StrCat("group ", group.id(), " is broken: ")));
  EXPECT_EQ(groups_->Get(group.id())->state(), v1::GROUP_STATE_BROKEN);
}

TEST_F(CollectiveJobTest, TransientGroupIsMadeForTheJobAndDroppedAfter) {
  v1::JobSpec spec;
  v1::CollectiveSpec* c = spec.mutable_collective();
  c->add_devices("cpu:0");
  c->add_devices("cpu:2");
  c->add_sizes_bytes(1024);
  c->set_iters(1);
  for (const char* d : {"cpu:0", "cpu:2"}) {
    const int rank = std::string(d) == "cpu:0" ? 0 : 1;
    workers_.client(d)->QueueRun(
        fake::Stream({fake::RankSize(rank, 1024, {1.0})}, fake::CollectiveResult()));
  }
  const v1::Job job = WaitFinal(Submit(spec));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error_message();
  ASSERT_EQ(job.result().collective().groups_size(), 1);
  const v1::CollectiveGroupUse& use = job.result().collective().groups(0);
  EXPECT_TRUE(use.transient());
  EXPECT_FALSE(use.was_resident());
  EXPECT_EQ(workers_.client("cpu:0")->prepare_group.calls(), 1u);
  EXPECT_TRUE(groups_->List().empty());
  for (const char* d : {"cpu:0", "cpu:2"}) {
    const auto left = workers_.client(d)->leave_group.requests();
    ASSERT_EQ(left.size(), 1u) << d;
    EXPECT_EQ(left[0].group(), use.group());
    EXPECT_FALSE(left[0].abort());
  }
}

// A member that makes no progress (stopped, or a collective that never
// completes) is bounded by the job's progress deadline: every member's worker
// is killed, the group is broken, and the job says what it was doing.
TEST_F(CollectiveJobTest, NoProgressPastTheDeadlineKillsTheMembersAndFailsTheJob) {
  const v1::Group group = MakeGroup({"cpu:0", "cpu:1"});
  workers_.client("cpu:0")->QueueRun(fake::UntilCancelled({fake::RankSize(0, 1024, {1.0})}));
  workers_.client("cpu:1")->QueueRun(fake::UntilCancelled({fake::RankSize(1, 1024, {1.0})}));
  v1::JobSpec spec = OnGroup(group.id(), {1024, 4096});
  spec.set_progress_timeout_seconds(1);
  const v1::Job job = WaitFinal(Submit(spec));
  ASSERT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.error_code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(job.error_message(),
              HasSubstr("no progress for 1 s (the job's progress deadline) while running size 2 "
                        "of 2 (4096 bytes)"));
  EXPECT_THAT(job.error_message(), HasSubstr("were killed and are being restarted"));
  EXPECT_THAT(workers_.kills(), ElementsAre(HasSubstr("cpu:0 1: no progress for 1 s"),
                                            HasSubstr("cpu:1 1: no progress for 1 s")));
  auto broken = groups_->Get(group.id());
  ASSERT_TRUE(broken.ok());
  EXPECT_EQ(broken->state(), v1::GROUP_STATE_BROKEN);
}

}  // namespace
}  // namespace benchd::server
