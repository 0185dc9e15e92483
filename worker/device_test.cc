#include "worker/device.h"

#include <gtest/gtest.h>

#include "worker/device_info.h"

namespace benchd::worker {
namespace {

TEST(DeviceTest, ParsesCpuDevices) {
  auto d = ParseWorkerDevice("cpu:0");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->name, "cpu:0");
  EXPECT_TRUE(d->device.is_cpu());
  EXPECT_FALSE(d->description.empty());
  EXPECT_EQ(ParseWorkerDevice("cpu:3")->name, "cpu:3");
}

TEST(DeviceTest, RejectsOtherSpellingsNamingTheField) {
  for (const char* bad :
       {"", "cpu", "cpu:", "cpu:-1", "cpu:1x", "gpu:0", "cuda", "cuda:a", " cpu:0"}) {
    auto d = ParseWorkerDevice(bad, "--device");
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(d.status().message().find("--device"), std::string::npos) << d.status();
  }
}

TEST(DeviceTest, CudaNeedsAnExistingGpu) {
  auto d = ParseWorkerDevice("cuda:0");
  if (!torch::cuda::is_available()) {
    EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition) << d.status();
    return;
  }
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->device.is_cuda());
  EXPECT_EQ(ParseWorkerDevice("cuda:999").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DeviceInfoTest, DescribesTheDevice) {
  const auto info = DescribeDevice(*ParseWorkerDevice("cpu:0"));
  EXPECT_EQ(info.name(), "cpu:0");
  EXPECT_GT(info.total_memory_bytes(), 0);
  EXPECT_GT(info.free_memory_bytes(), 0);
  EXPECT_LE(info.free_memory_bytes(), info.total_memory_bytes());
  const auto& v = WorkerVersions();
  EXPECT_EQ(v.torch(), TORCH_VERSION);
  EXPECT_EQ(v.cuda_runtime().empty(), !torch::cuda::is_available());
}

}  // namespace
}  // namespace benchd::worker
