#include "worker/out_of_memory.h"

#include <sys/resource.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/device_info.h"

#if BENCHD_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace benchd::worker {

std::string GiB(int64_t bytes) {
  return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / (1 << 30));
}

bool IsHostOutOfMemory(const c10::Error& e) {
  return e.msg().find("DefaultCPUAllocator: can't allocate memory") != std::string::npos;
}

int64_t HostMaxRssBytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports kB
}

#if BENCHD_WITH_CUDA
namespace {
c10::CachingAllocator::Stat AllocatedStat(const WorkerDevice& dev) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(dev.device.index());
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
}
}  // namespace
#endif

int64_t AllocatedBytes(const WorkerDevice& dev) {
#if BENCHD_WITH_CUDA
  if (dev.is_cuda()) return AllocatedStat(dev).current;
#endif
  (void)dev;
  return 0;
}

int64_t PeakAllocatedBytes(const WorkerDevice& dev) {
#if BENCHD_WITH_CUDA
  if (dev.is_cuda()) return AllocatedStat(dev).peak;
#endif
  (void)dev;
  return 0;
}

void ResetPeakAllocated(const WorkerDevice& dev) {
#if BENCHD_WITH_CUDA
  if (dev.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(dev.device.index());
#endif
  (void)dev;
}

std::string MemoryFigures(const WorkerDevice& dev) {
#if BENCHD_WITH_CUDA
  if (dev.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(dev.device.index());
    constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    c10::cuda::CUDAGuard guard(dev.device.index());
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    return absl::StrCat("allocated by PyTorch ", GiB(stats.allocated_bytes[kAll].current),
                        ", reserved by PyTorch ", GiB(stats.reserved_bytes[kAll].current),
                        ", device total ", GiB(static_cast<int64_t>(total)), ", device free ",
                        GiB(static_cast<int64_t>(free)));
  }
#endif
  const v1::Device d = DescribeDevice(dev);
  return absl::StrCat("host memory total ", GiB(d.total_memory_bytes()), ", available ",
                      GiB(d.free_memory_bytes()), ", worker max RSS ", GiB(HostMaxRssBytes()));
}

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace benchd::worker
