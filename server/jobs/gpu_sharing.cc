#include "server/jobs/gpu_sharing.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace benchd::server {
namespace {

std::string Memory(int64_t bytes) {
  if (bytes < 0) return "GPU memory not reported";
  if (bytes >= (int64_t{1} << 30)) {
    return absl::StrFormat("%.1f GiB of GPU memory", static_cast<double>(bytes) / (1 << 30));
  }
  return absl::StrFormat("%d MiB of GPU memory", bytes >> 20);
}

std::string Named(const std::string& device, const std::string& uuid) {
  return uuid.empty() ? device : absl::StrCat(device, " (", uuid, ")");
}

}  // namespace

absl::StatusOr<GpuSharingMode> ParseGpuSharingMode(const std::string& text) {
  if (text == "dedicated") return GpuSharingMode::kDedicated;
  if (text == "when-idle") return GpuSharingMode::kWhenIdle;
  return absl::InvalidArgumentError(absl::StrCat(
      "expected dedicated (benchd's GPUs are its own) or when-idle (a GPU job runs only on a "
      "GPU no other process uses), got '",
      text, "'"));
}

std::string GpuSharingModeName(GpuSharingMode mode) {
  return mode == GpuSharingMode::kWhenIdle ? "when-idle" : "dedicated";
}

GpuSharing::GpuSharing(absl::StatusOr<std::unique_ptr<GpuProcessSource>> source, Hooks hooks)
    : hooks_(std::move(hooks)) {
  if (source.ok()) {
    source_ = *std::move(source);
  } else {
    unavailable_ = std::string(source.status().message());
  }
}

std::string GpuSharing::Describe() const {
  if (can_check()) {
    return "--gpu-sharing when-idle: a GPU job starts only when no other process uses its GPU "
           "(NVML); a job during which another process appeared is marked with a warning";
  }
  return absl::StrCat(
      "WARNING: --gpu-sharing when-idle cannot check the GPUs: ", unavailable_,
      ". Every GPU job will be REFUSED (FAILED_PRECONDITION) until NVML loads at the next "
      "start; CPU jobs run. Give the container the driver's utility libraries "
      "(NVIDIA_DRIVER_CAPABILITIES=compute,utility), or use --gpu-sharing dedicated on GPUs "
      "benchd has to itself");
}

std::vector<std::string> GpuSharing::LocalGpus(const std::vector<std::string>& devices) {
  std::vector<std::string> out;
  for (const std::string& d : devices) {
    if (absl::StartsWith(d, "cuda:")) out.push_back(d);
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> GpuSharing::Others(const std::string& device,
                                                            const std::string& uuid) const {
  if (!can_check()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "whether another process uses ", Named(device, uuid), " cannot be checked (", unavailable_,
        "), and with --gpu-sharing when-idle benchd runs no GPU job it cannot "
        "check: make NVML available (NVIDIA_DRIVER_CAPABILITIES=compute,utility) "
        "or run the daemon with --gpu-sharing dedicated"));
  }
  auto processes = source_->Processes(uuid);
  if (!processes.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("whether another process uses ", Named(device, uuid),
                     " cannot be checked: ", processes.status().message()));
  }
  const std::vector<int64_t> own = hooks_.own_pids();
  std::vector<std::string> others;
  for (const GpuProcess& p : *processes) {
    if (std::find(own.begin(), own.end(), p.pid) != own.end()) continue;
    others.push_back(absl::StrCat("pid ", p.pid, " (", hooks_.name(p.pid), ", ",
                                  Memory(p.used_bytes), p.graphics ? ", graphics" : "", ")"));
  }
  return others;
}

absl::Status GpuSharing::CheckIdle(const std::vector<std::string>& devices, bool unknown_ok) const {
  for (const std::string& device : LocalGpus(devices)) {
    const std::string uuid = hooks_.uuid(device);
    if (uuid.empty()) {
      if (unknown_ok) continue;
      return absl::FailedPreconditionError(absl::StrCat(
          "whether another process uses ", device,
          " cannot be checked: its worker has not reported the GPU's UUID (it has not come up)"));
    }
    auto others = Others(device, uuid);
    if (!others.ok()) return others.status();
    if (others->empty()) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        Named(device, uuid), " is in use by ",
        others->size() == 1 ? "another process" : absl::StrCat(others->size(), " other processes"),
        ": ", absl::StrJoin(*others, ", "),
        ". This daemon runs GPU jobs only on an idle GPU (--gpu-sharing when-idle): submit "
        "again once it has ended"));
  }
  return absl::OkStatus();
}

std::vector<std::string> GpuSharing::SharedDuring(const std::vector<std::string>& devices) const {
  std::vector<std::string> warnings;
  for (const std::string& device : LocalGpus(devices)) {
    const std::string uuid = hooks_.uuid(device);
    if (uuid.empty()) continue;
    auto others = Others(device, uuid);
    if (!others.ok()) {
      warnings.push_back(absl::StrCat("at the job's end, ", others.status().message()));
    } else if (!others->empty()) {
      warnings.push_back(absl::StrCat(
          "shared GPU: ", Named(device, uuid), " was also used by ", absl::StrJoin(*others, ", "),
          " when the job ended (it started on an idle GPU): its figures were taken on a shared "
          "GPU"));
    }
  }
  return warnings;
}

}  // namespace benchd::server
