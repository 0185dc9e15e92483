// The one device a worker serves: its name as benchd spells it ("cuda:0",
// "cpu:0") and the torch::Device it maps to.
#ifndef BENCHD_WORKER_DEVICE_H_
#define BENCHD_WORKER_DEVICE_H_

#include <torch/torch.h>

#include <string>

#include "absl/status/statusor.h"

namespace benchd::worker {

struct WorkerDevice {
  std::string name;         // "cuda:1", "cpu:0"
  torch::Device device;     // cuda:1, or cpu (LibTorch has a single CPU device)
  std::string description;  // "NVIDIA H100 80GB HBM3", or the CPU's model name

  bool is_cuda() const { return device.is_cuda(); }
};

// Parses "cpu:N" or "cuda:N" (N a non-negative integer). For CUDA it checks that
// CUDA is usable and the index exists. INVALID_ARGUMENT / FAILED_PRECONDITION
// name `field` and what is accepted.
absl::StatusOr<WorkerDevice> ParseWorkerDevice(const std::string& text,
                                               const std::string& field = "device");

// Waits for all work queued on the device (no-op on CPU, whose ops return done).
void Synchronize(const WorkerDevice& device);

// Frees cached, unused device memory (CUDA caching allocator); no-op on CPU.
void ReleaseCachedMemory(const WorkerDevice& device);

// "model name" from /proc/cpuinfo, or "unknown CPU".
std::string CpuModelName();

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_DEVICE_H_
