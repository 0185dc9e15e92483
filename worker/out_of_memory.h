// What every run needs to measure memory and to say "out of memory" the same
// way: the allocator's figures, whether an error is one, and the device's
// memory figures for the message.
#ifndef BENCHD_WORKER_OUT_OF_MEMORY_H_
#define BENCHD_WORKER_OUT_OF_MEMORY_H_

#include <c10/util/Exception.h>

#include <cstdint>
#include <string>

#include "worker/device.h"

namespace benchd::worker {

// "1.50 GiB".
std::string GiB(int64_t bytes);

// LibTorch's CPU allocator reports failure as a plain c10::Error (only the
// CUDA allocator throws c10::OutOfMemoryError), so it is known by its text
// (c10/core/impl/alloc_cpu.cpp).
bool IsHostOutOfMemory(const c10::Error& e);

// The process's resident-set high-water mark (the kernel cannot reset it, so
// on a CPU it covers the worker's lifetime).
int64_t HostMaxRssBytes();

// The CUDA caching allocator's allocated bytes now, and their peak since the
// last ResetPeakAllocated; 0 on a CPU, which has no allocator to ask.
int64_t AllocatedBytes(const WorkerDevice& dev);
int64_t PeakAllocatedBytes(const WorkerDevice& dev);
void ResetPeakAllocated(const WorkerDevice& dev);

// Memory figures for an out-of-memory message, taken before anything is
// freed: the caching allocator's and the device's on CUDA, the host's on CPU.
std::string MemoryFigures(const WorkerDevice& dev);

// The first line of LibTorch's (multi-line) message.
std::string FirstLine(const std::string& s);

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_OUT_OF_MEMORY_H_
