#include "server/jobs/gpu_sharing.h"

#include <map>
#include <mutex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace benchd::server
