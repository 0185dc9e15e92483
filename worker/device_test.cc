#include "worker/device.h"

#include <gtest/gtest.h>

#include <array>

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

// nvidia-smi -L and dcgm-exporter's labels, byte for byte: the metrics join on them.
TEST(DeviceInfoTest, FormatsGpuIdentityAsNvmlDoes) {
  const std::array<uint8_t, 16> uuid = {0x1c, 0x2b, 0x08, 0xc1, 0xf6, 0x02, 0xd2, 0x90,
                                        0x45, 0x19, 0x86, 0x3b, 0xc0, 0xc9, 0x60, 0x79};
  EXPECT_EQ(FormatGpuUuid(uuid), "GPU-1c2b08c1-f602-d290-4519-863bc0c96079");
  EXPECT_EQ(FormatPciBusId(0, 0x30, 0), "00000000:30:00.0");
  EXPECT_EQ(FormatPciBusId(1, 0xb4, 0x1f), "00000001:B4:1F.0");
}

TEST(DeviceInfoTest, DescribesTheWorkerWithItsGpuIdentity) {
  const auto cpu = DescribeWorker(*ParseWorkerDevice("cpu:0"));
  EXPECT_EQ(cpu.device().name(), "cpu:0");
  EXPECT_GT(cpu.pid(), 0);
  EXPECT_EQ(cpu.uuid(), "");  // a CPU has none
  EXPECT_EQ(cpu.pci_bus_id(), "");
  if (!torch::cuda::is_available()) return;
  const auto gpu = DescribeWorker(*ParseWorkerDevice("cuda:0"));
  EXPECT_EQ(gpu.uuid().size(), 40u) << gpu.uuid();
  EXPECT_EQ(gpu.uuid().rfind("GPU-", 0), 0u) << gpu.uuid();
  EXPECT_EQ(gpu.pci_bus_id().size(), 16u) << gpu.pci_bus_id();
}

}  // namespace
}  // namespace benchd::worker
