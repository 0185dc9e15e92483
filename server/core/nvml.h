// The GPU's processes as NVML sees them, with NVML loaded at run time
// (dlopen of libnvidia-ml.so.1, the driver's library): nothing links NVML at
// build time, and a machine without the NVIDIA driver (CPU-only, or a
// container started without the driver's utility libraries) still runs
// benchd. Used by --gpu-sharing when-idle (server/jobs/gpu_sharing.h).
#ifndef BENCHD_SERVER_CORE_NVML_H_
#define BENCHD_SERVER_CORE_NVML_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace benchd::server {

// One process with a context on a GPU.
struct GpuProcess {
  int64_t pid = 0;          // as the driver reports it (the host's pid namespace on older drivers)
  int64_t used_bytes = -1;  // its GPU memory; -1 when NVML does not say (some containers, MIG)
  bool graphics = false;    // from the graphics list (else the compute list)
};

// Lists the processes on a GPU named by its UUID ("GPU-1c2b08c1-...", as the
// worker reports it and nvidia-smi -L prints it). Thread-safe.
class GpuProcessSource {
 public:
  virtual ~GpuProcessSource() = default;
  // nvmlDeviceGetComputeRunningProcesses_v3 and ..GraphicsRunningProcesses_v3
  // of the device, one entry per pid (a process in both lists once, as
  // compute); an error naming the UUID and NVML's message.
  virtual absl::StatusOr<std::vector<GpuProcess>> Processes(const std::string& uuid) = 0;
};

// NVML from `library` (dlopen), initialised (nvmlInit_v2). Without it,
// FAILED_PRECONDITION saying what failed: the library cannot be loaded
// (dlerror's text), a function is missing (a driver older than R470, which
// has no _v3 process lists), or nvmlInit_v2 failed (NVML's message).
absl::StatusOr<std::unique_ptr<GpuProcessSource>> LoadNvml(
    const std::string& library = "libnvidia-ml.so.1");

// "not visible from this container" when /proc/<pid>/comm cannot be read
// (another PID namespace: the driver reports host pids), else the name there.
std::string ProcessName(int64_t pid, const std::string& proc = "/proc");

}  // namespace benchd::server

#endif  // BENCHD_SERVER_CORE_NVML_H_
