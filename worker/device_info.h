// What a worker reports about itself: its device (memory, compute capability)
// and the versions of the software it measures with.
#ifndef BENCHD_WORKER_DEVICE_INFO_H_
#define BENCHD_WORKER_DEVICE_INFO_H_

#include "benchd/v1/bench.pb.h"
#include "worker/device.h"

namespace benchd::worker {

// name, description, total/free memory (cudaMemGetInfo; on CPU MemTotal and
// MemAvailable from /proc/meminfo) and, for CUDA, compute capability "9.0".
// The worker_* fields are the daemon's to fill.
v1::Device DescribeDevice(const WorkerDevice& device);

// benchd, LibTorch and, where CUDA is available, the CUDA runtime and driver,
// NCCL and cuDNN versions ("" where absent). Computed once.
const v1::Versions& WorkerVersions();

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_DEVICE_INFO_H_
