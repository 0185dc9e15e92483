#include "server/core/devices.h"

#include "gtest/gtest.h"

namespace benchd::server {
namespace {

TEST(DeviceNameTest, AcceptsCpuAndCudaOrdinals) {
  EXPECT_TRUE(CheckDeviceName("cpu:0").ok());
  EXPECT_TRUE(CheckDeviceName("cuda:12").ok());
  for (const char* bad : {"", "cuda", "gpu:0", "cuda:-1", "cuda:0 ", "CUDA:0", "cuda:1234"}) {
    EXPECT_EQ(CheckDeviceName(bad).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DeviceNameTest, ServedDevicesNameTheFieldAndWhatIsServed) {
  const std::vector<std::string> served = {"cpu:0", "cpu:1"};
  EXPECT_TRUE(CheckServedDevice("device", "cpu:1", served).ok());
  const absl::Status other = CheckServedDevice("targets[0].devices", "cuda:0", served);
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(other.message(),
            "targets[0].devices: cuda:0 is not served by this daemon; it serves cpu:0, cpu:1");
  const absl::Status bad = CheckServedDevice("device", "gpu\n0", served);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(),
            "device: 'gpu\\n0' is not a device name; expected cpu:N or cuda:N, one of cpu:0, "
            "cpu:1");
}

}  // namespace
}  // namespace benchd::server
