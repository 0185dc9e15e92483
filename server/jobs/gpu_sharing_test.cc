#include "server/jobs/gpu_sharing.h"

#include <map>
#include <mutex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/job_test_util.h"

namespace benchd::server {
namespace {

using ::testing::HasSubstr;

// NVML's process lists, set by the test.
class FakeGpuProcessLists final : public GpuProcessSource {
 public:
  absl::StatusOr<std::vector<GpuProcess>> Processes(const std::string& uuid) override {
    std::lock_guard<std::mutex> lock(mu);
    if (!error.ok()) return error;
    return by_uuid[uuid];
  }
  void Set(const std::string& uuid, std::vector<GpuProcess> processes) {
    std::lock_guard<std::mutex> lock(mu);
    by_uuid[uuid] = std::move(processes);
  }
  std::mutex mu;
  std::map<std::string, std::vector<GpuProcess>> by_uuid;
  absl::Status error;
};

constexpr char kUuid0[] = "GPU-1c2b08c1-f602-d290-4519-863bc0c96079";

struct SharingFixture {
  FakeGpuProcessLists* lists = new FakeGpuProcessLists;
  GpuSharing sharing{
      std::unique_ptr<GpuProcessSource>(lists),
      GpuSharing::Hooks{
          [](const std::string& d) { return d == "cuda:0" ? std::string(kUuid0) : std::string(); },
          [] {
            return std::vector<int64_t>{100, 101};
          },
          [](int64_t pid) {
            return pid == 4242 ? std::string("python3")
                               : std::string("not visible from this container");
          }}};
};

TEST(GpuSharingTest, ParsesTheModesAndRefusesOthersNamingBoth) {
  EXPECT_EQ(*ParseGpuSharingMode("dedicated"), GpuSharingMode::kDedicated);
  EXPECT_EQ(*ParseGpuSharingMode("when-idle"), GpuSharingMode::kWhenIdle);
  auto bad = ParseGpuSharingMode("shared");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("dedicated"));
  EXPECT_THAT(bad.status().message(), HasSubstr("when-idle"));
  EXPECT_THAT(bad.status().message(), HasSubstr("'shared'"));
  EXPECT_EQ(GpuSharingModeName(GpuSharingMode::kWhenIdle), "when-idle");
}

TEST(GpuSharingTest, OwnWorkersAndCpusAndOtherNodesPass) {
  SharingFixture f;
  f.lists->by_uuid[kUuid0] = {{100, 500 << 20, false}};  // benchd's own worker
  EXPECT_TRUE(f.sharing.CheckIdle({"cuda:0", "cpu:0", "node1/cuda:0"}, false).ok());
  EXPECT_TRUE(f.sharing.SharedDuring({"cuda:0"}).empty());
}

TEST(GpuSharingTest, AnotherProcessIsRefusedNamingDeviceUuidPidNameAndMemory) {
  SharingFixture f;
  f.lists->by_uuid[kUuid0] = {
      {100, 500 << 20, false}, {4242, int64_t{3} << 30, false}, {777, -1, true}};
  absl::Status s = f.sharing.CheckIdle({"cuda:0"}, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("cuda:0 (GPU-1c2b08c1-f602-d290-4519-863bc0c96079)"));
  EXPECT_THAT(s.message(), HasSubstr("2 other processes"));
  EXPECT_THAT(s.message(), HasSubstr("pid 4242 (python3, 3.0 GiB of GPU memory)"));
  EXPECT_THAT(s.message(),
              HasSubstr("pid 777 (not visible from this container, GPU memory not reported, "
                        "graphics)"));
  EXPECT_THAT(s.message(), HasSubstr("--gpu-sharing when-idle"));
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("pid 100")));
}

TEST(GpuSharingTest, AProcessThatCameDuringTheJobIsAWarning) {
  SharingFixture f;
  f.lists->by_uuid[kUuid0] = {{4242, 64 << 20, false}};
  auto warnings = f.sharing.SharedDuring({"cuda:0", "cpu:0"});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("shared GPU"));
  EXPECT_THAT(warnings[0], HasSubstr("pid 4242 (python3, 64 MiB of GPU memory)"));
  f.lists->error = absl::UnavailableError("NVML nvmlDeviceGetHandleByUUID: GPU is lost");
  warnings = f.sharing.SharedDuring({"cuda:0"});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("cannot be checked"));
  EXPECT_EQ(f.sharing.CheckIdle({"cuda:0"}, false).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(GpuSharingTest, AnUnknownUuidIsSkippedAtSubmitAndRefusedBeforeTheJob) {
  SharingFixture f;
  EXPECT_TRUE(f.sharing.CheckIdle({"cuda:1"}, true).ok());
  absl::Status s = f.sharing.CheckIdle({"cuda:1"}, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("has not reported the GPU's UUID"));
}

TEST(GpuSharingTest, WithoutNvmlEveryGpuJobIsRefusedAndCpuJobsRun) {
  GpuSharing sharing(LoadNvml("libbenchd-no-such-nvml.so.1"),
                     GpuSharing::Hooks{[](const std::string&) { return std::string(kUuid0); },
                                       [] { return std::vector<int64_t>{}; }});
  EXPECT_FALSE(sharing.can_check());
  EXPECT_THAT(sharing.Describe(), HasSubstr("REFUSED"));
  EXPECT_THAT(sharing.Describe(), HasSubstr("libbenchd-no-such-nvml.so.1"));
  EXPECT_TRUE(sharing.CheckIdle({"cpu:0"}, false).ok());
  absl::Status s = sharing.CheckIdle({"cuda:0"}, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("cannot be checked"));
  EXPECT_THAT(s.message(), HasSubstr("--gpu-sharing dedicated"));
}

// The seam in JobManager, over fake workers: refused at Submit, failed at
// dispatch when a process came while the job queued, a warning for one that
// came during the run; CPU jobs never checked.
class GpuSharingJobsTest : public JobManagerFixture {
 protected:
  GpuSharingJobsTest() : JobManagerFixture({"cuda:0", "cpu:0"}) {}
  FakeGpuProcessLists* lists_ = new FakeGpuProcessLists;
  GpuSharing sharing_{
      std::unique_ptr<GpuProcessSource>(lists_),
      GpuSharing::Hooks{
          [](const std::string& d) { return d == "cuda:0" ? std::string(kUuid0) : std::string(); },
          [this] {
            std::vector<int64_t> pids;
            for (const auto& d : workers_.Devices()) pids.push_back(d.worker_pid());
            return pids;
          },
          [](int64_t) { return std::string("python3"); }}};
};

TEST_F(GpuSharingJobsTest, RefusedAtSubmitFailedAtDispatchWarnedAtTheEnd) {
  gpu_sharing_ = &sharing_;
  workers_.UpAll();
  StartJobs();
  const int64_t own = workers_.Devices()[0].worker_pid();
  lists_->Set(kUuid0, {{own, 500 << 20, false}, {4242, int64_t{1} << 30, false}});
  auto refused = jobs_->Submit(Benchmark("cuda:0"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("pid 4242 (python3, 1.0 GiB"));
  EXPECT_EQ(WaitFinal(Submit(Benchmark("cpu:0"))).state(), v1::JOB_STATE_SUCCEEDED);

  // cuda:0 idle but for benchd's worker: the first job starts; a process
  // comes while it runs and the second waits in the queue.
  lists_->Set(kUuid0, {{own, 500 << 20, false}});
  Gate started, release;
  workers_.client("cuda:0")->QueueRun([&](FakeRun& run) {
    started.Open();
    if (!release.Wait()) return fake::Broken(absl::InternalError("never released"));
    return fake::Last(fake::BenchmarkResult(run.request().spec().device()));
  });
  const std::string first = Submit(Benchmark("cuda:0"));
  ASSERT_TRUE(started.Wait());
  const std::string second = Submit(Benchmark("cuda:0"));
  lists_->Set(kUuid0, {{own, 500 << 20, false}, {4242, 64 << 20, false}});
  release.Open();
  const v1::Job ran = WaitFinal(first);
  EXPECT_EQ(ran.state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(ran.warnings_size(), 1);
  EXPECT_THAT(ran.warnings(0), HasSubstr("shared GPU: cuda:0 (" + std::string(kUuid0) + ")"));
  EXPECT_THAT(ran.warnings(0), HasSubstr("pid 4242 (python3, 64 MiB"));
  const v1::Job failed = WaitFinal(second);
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.error_code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(failed.error_message(), HasSubstr("is in use by another process: pid 4242"));
  EXPECT_FALSE(failed.has_started());
  EXPECT_EQ(workers_.client("cuda:0")->runs().size(), 1u);
}

}  // namespace
}  // namespace benchd::server
