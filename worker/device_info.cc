#include "worker/device_info.h"

#include <torch/version.h>

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/version.h"

#if BENCHD_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/cuda/nccl.h>
#endif

namespace benchd::worker {
namespace {

// A value in kB from /proc/meminfo ("MemTotal:  16318668 kB"), in bytes; 0 if absent.
int64_t MeminfoBytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  int64_t kb = 0;
  while (in >> name >> kb) {
    std::getline(in, unit);
    if (name == key + ":") return kb * 1024;
  }
  return 0;
}

#if BENCHD_WITH_CUDA
// CUDA encodes versions as 1000*major + 10*minor.
std::string CudaVersionString(int v) { return absl::StrCat(v / 1000, ".", (v % 1000) / 10); }

// cuDNN 9 encodes 10000*major + 100*minor + patch; cuDNN 8 used 1000*major.
std::string CudnnVersionString(long v) {
  if (v <= 0) return "";
  const long major_unit = v >= 90000 ? 10000 : 1000;
  return absl::StrCat(v / major_unit, ".", (v % major_unit) / 100, ".", v % 100);
}
#endif

v1::Versions CollectVersions() {
  v1::Versions v;
  v.set_benchd(kVersion);
  v.set_torch(TORCH_VERSION);
#if BENCHD_WITH_CUDA
  if (torch::cuda::is_available()) {
    int runtime = 0, driver = 0;
    if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
      v.set_cuda_runtime(CudaVersionString(runtime));
    if (cudaDriverGetVersion(&driver) == cudaSuccess) v.set_cuda_driver(CudaVersionString(driver));
    // NCCL packs major << 32 | minor << 16 | patch (as torch.cuda.nccl.version()).
    const uint64_t nccl = torch::cuda::nccl::version();
    v.set_nccl(absl::StrCat(nccl >> 32, ".", (nccl >> 16) & 0xffff, ".", nccl & 0xffff,
                            torch::cuda::nccl::version_suffix()));
    // The cuDNN library actually loaded (what torch.backends.cudnn.version() reports).
    if (at::detail::getCUDAHooks().hasCuDNN()) {
      v.set_cudnn(CudnnVersionString(at::detail::getCUDAHooks().versionRuntimeCuDNN()));
    }
  }
#endif
  return v;
}

}  // namespace

v1::Device DescribeDevice(const WorkerDevice& device) {
  v1::Device d;
  d.set_name(device.name);
  d.set_description(device.description);
#if BENCHD_WITH_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDAGuard guard(device.device.index());
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
      d.set_total_memory_bytes(static_cast<int64_t>(total));
      d.set_free_memory_bytes(static_cast<int64_t>(free));
    }
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(device.device.index());
    d.set_compute_capability(absl::StrCat(p->major, ".", p->minor));
    return d;
  }
#endif
  d.set_total_memory_bytes(MeminfoBytes("MemTotal"));
  d.set_free_memory_bytes(MeminfoBytes("MemAvailable"));
  return d;
}

std::string FormatGpuUuid(const std::array<uint8_t, 16>& b) {
  std::string hex;
  for (uint8_t byte : b) absl::StrAppendFormat(&hex, "%02x", byte);
  return absl::StrCat("GPU-", hex.substr(0, 8), "-", hex.substr(8, 4), "-", hex.substr(12, 4), "-",
                      hex.substr(16, 4), "-", hex.substr(20, 12));
}

std::string FormatPciBusId(int domain, int bus, int device) {
  return absl::StrFormat("%08X:%02X:%02X.0", domain, bus, device);
}

internal::WorkerInfo DescribeWorker(const WorkerDevice& device) {
  internal::WorkerInfo info;
  *info.mutable_device() = DescribeDevice(device);
  *info.mutable_versions() = WorkerVersions();
  info.set_pid(getpid());
#if BENCHD_WITH_CUDA
  if (device.is_cuda()) {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(device.device.index());
    std::array<uint8_t, 16> uuid;
    for (size_t i = 0; i < uuid.size(); ++i) uuid[i] = static_cast<uint8_t>(p->uuid.bytes[i]);
    info.set_uuid(FormatGpuUuid(uuid));
    info.set_pci_bus_id(FormatPciBusId(p->pciDomainID, p->pciBusID, p->pciDeviceID));
  }
#endif
  return info;
}

const v1::Versions& WorkerVersions() {
  static const v1::Versions* versions = new v1::Versions(CollectVersions());
  return *versions;
}

}  // namespace benchd::worker
