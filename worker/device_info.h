// What a worker reports about itself: its device (memory, compute capability)
// and the versions of the software it measures with.
#ifndef BENCHD_WORKER_DEVICE_INFO_H_
#define BENCHD_WORKER_DEVICE_INFO_H_

#include <array>
#include <cstdint>
#include <string>

#include "benchd/internal/worker.pb.h"
#include "benchd/v1/bench.pb.h"
#include "worker/device.h"

namespace benchd::worker {

// name, description, total/free memory (cudaMemGetInfo; on CPU MemTotal and
// MemAvailable from /proc/meminfo) and, for CUDA, compute capability "9.0".
// The worker_* fields are the daemon's to fill.
v1::Device DescribeDevice(const WorkerDevice& device);

// What GetInfo answers: DescribeDevice, WorkerVersions, the pid and, for
// CUDA, the GPU's UUID and PCI bus id as NVML and dcgm-exporter spell them.
internal::WorkerInfo DescribeWorker(const WorkerDevice& device);

// "GPU-1c2b08c1-f602-d290-4519-863bc0c96079" from cudaDeviceProp::uuid: the
// form nvidia-smi -L and dcgm-exporter's UUID label use.
std::string FormatGpuUuid(const std::array<uint8_t, 16>& bytes);

// "00000000:30:00.0" (NVML's busId, dcgm-exporter's pci_bus_id label: an
// 8-digit domain, upper-case hex) from cudaDeviceProp's PCI domain, bus and device.
std::string FormatPciBusId(int domain, int bus, int device);

// benchd, LibTorch and, where CUDA is available, the CUDA runtime and driver,
// NCCL and cuDNN versions ("" where absent). Computed once.
const v1::Versions& WorkerVersions();

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_DEVICE_INFO_H_
