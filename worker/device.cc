#include "worker/device.h"

#include <charconv>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

#if BENCHD_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace benchd::worker {
namespace {

bool ParseIndex(absl::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && *out >= 0;
}

}  // namespace

absl::StatusOr<WorkerDevice> ParseWorkerDevice(const std::string& text, const std::string& field) {
  absl::string_view rest = text;
  int64_t index = -1;
  if (absl::ConsumePrefix(&rest, "cpu:") && ParseIndex(rest, &index)) {
    return WorkerDevice{absl::StrCat("cpu:", index), torch::Device(torch::kCPU), CpuModelName()};
  }
  rest = text;
  if (!(absl::ConsumePrefix(&rest, "cuda:") && ParseIndex(rest, &index))) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": expected cpu:N or cuda:N (N = 0, 1, ...), got '", text, "'"));
  }
#if BENCHD_WITH_CUDA
  if (!torch::cuda::is_available()) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ": ", text, " asked for, but CUDA is not available on this machine"));
  }
  const int64_t count = torch::cuda::device_count();
  if (index >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", text, " does not exist; this machine has ", count, " CUDA device(s)"));
  }
  const auto idx = static_cast<c10::DeviceIndex>(index);
  return WorkerDevice{absl::StrCat("cuda:", index), torch::Device(torch::kCUDA, idx),
                      at::cuda::getDeviceProperties(idx)->name};
#else
  return absl::FailedPreconditionError(
      absl::StrCat(field, ": ", text, " asked for, but this benchd-worker was built without CUDA"));
#endif
}

void Synchronize(const WorkerDevice& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.device.index());
}

void ReleaseCachedMemory(const WorkerDevice& device) {
#if BENCHD_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#else
  (void)device;
#endif
}

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "model name")) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
    }
  }
  return "unknown CPU";
}

}  // namespace benchd::worker
