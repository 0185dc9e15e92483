// --gpu-sharing: whether benchd's GPUs are its own (dedicated, the default:
// a benchmarking pool that holds its GPUs) or shared with other work, such
// as training jobs the scheduler places on the same GPUs (when-idle: a GPU
// job starts only on a GPU no other process uses, and a job during which
// another process appeared is marked). The one seam: JobManager asks CheckIdle
// at Submit and before a GPU job starts, and SharedDuring when it ends
// (deploy/README.md "Sharing GPUs with training jobs").
#ifndef BENCHD_SERVER_JOBS_GPU_SHARING_H_
#define BENCHD_SERVER_JOBS_GPU_SHARING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/nvml.h"

namespace benchd::server {

enum class GpuSharingMode { kDedicated, kWhenIdle };

// "dedicated" or "when-idle"; anything else INVALID_ARGUMENT naming both.
absl::StatusOr<GpuSharingMode> ParseGpuSharingMode(const std::string& text);
std::string GpuSharingModeName(GpuSharingMode mode);

// The when-idle check of this node's GPUs ("cuda:N"; CPU devices and other
// members' "node1/cuda:0" are not its to check). Thread-safe.
class GpuSharing {
 public:
  struct Hooks {
    // The UUID `device`'s worker reported ("GPU-..."); "" while unknown (its
    // worker has not come up yet).
    std::function<std::string(const std::string& device)> uuid;
    // The pids of benchd's own workers, every device's: never "another process".
    std::function<std::vector<int64_t>()> own_pids;
    // A pid's name (ProcessName: /proc/<pid>/comm).
    std::function<std::string(int64_t pid)> name = [](int64_t pid) { return ProcessName(pid); };
  };
  // `source`: NVML (LoadNvml), or why it could not be loaded: then every GPU
  // job is refused, since nothing can say the GPU is idle (fail closed).
  GpuSharing(absl::StatusOr<std::unique_ptr<GpuProcessSource>> source, Hooks hooks);

  // What the mode does here, for the start-up log (loud when NVML is missing).
  std::string Describe() const;
  bool can_check() const { return source_ != nullptr; }

  // OK when no GPU among `devices` has a process other than benchd's
  // workers. Else FAILED_PRECONDITION naming the device, its UUID and each
  // other process (pid, name, GPU memory), or why it cannot be checked.
  // A GPU whose UUID is not known yet is skipped with `unknown_ok` (Submit:
  // the dispatcher checks again before the job starts), else refused.
  absl::Status CheckIdle(const std::vector<std::string>& devices, bool unknown_ok) const;

  // After a job ran: one warning per GPU among `devices` that another
  // process was using when it ended (the job had started on an idle GPU, so
  // that process came during the measurement), or that could not be checked.
  std::vector<std::string> SharedDuring(const std::vector<std::string>& devices) const;

  // This node's GPUs among `devices`: "cuda:N".
  static std::vector<std::string> LocalGpus(const std::vector<std::string>& devices);

 private:
  // The processes on `device` that are not benchd's, described; or why not known.
  absl::StatusOr<std::vector<std::string>> Others(const std::string& device,
                                                  const std::string& uuid) const;

  std::unique_ptr<GpuProcessSource> source_;
  std::string unavailable_;  // why NVML is missing
  Hooks hooks_;
};

}  // namespace benchd::server

#endif  // BENCHD_SERVER_JOBS_GPU_SHARING_H_
