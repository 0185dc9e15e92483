#include "server/core/nvml.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace benchd::server {
namespace {

TEST(NvmlTest, AMissingLibraryIsRefusedSayingWhy) {
  auto nvml = LoadNvml("libbenchd-no-such-nvml.so.1");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(nvml.status().message().find("NVML cannot be loaded"), std::string::npos);
  EXPECT_NE(nvml.status().message().find("libbenchd-no-such-nvml.so.1"), std::string::npos);
  EXPECT_NE(nvml.status().message().find("NVIDIA_DRIVER_CAPABILITIES"), std::string::npos);
}

TEST(NvmlTest, ALibraryWithoutNvmlNamesTheMissingFunction) {
  auto nvml = LoadNvml("libc.so.6");
  ASSERT_FALSE(nvml.ok());
  EXPECT_NE(nvml.status().message().find("lacks nvmlInit_v2"), std::string::npos) << nvml.status();
}

TEST(NvmlTest, ProcessNamesComeFromProcOrSayTheyAreNotVisible) {
  const std::string dir = ::testing::TempDir() + "/nvml_test_proc";
  std::filesystem::create_directories(dir + "/4242");
  std::ofstream(dir + "/4242/comm") << "python3\n";
  EXPECT_EQ(ProcessName(4242, dir), "python3");
  EXPECT_EQ(ProcessName(4243, dir), "not visible from this container");
  EXPECT_EQ(ProcessName(0, dir), "not visible from this container");
  std::string self;
  std::getline(std::ifstream("/proc/self/comm"), self);
  EXPECT_EQ(ProcessName(getpid()), self);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace benchd::server
