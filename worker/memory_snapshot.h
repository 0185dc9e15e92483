// Reads the CUDA caching allocator's snapshot pickle (the bytes of
// torch::cuda::_memory_snapshot_pickled(), the format memory_viz reads) into
// the torch-free benchd::memory::Snapshot (common/memory_trace.h), using
// LibTorch's own unpickler (torch::jit::unpickle), the reader of the pickler
// that wrote it.
//
// Why parse the pickle rather than read the allocator's C++ snapshot structs
// directly: the numbers then come from exactly the artifact users open in
// memory_viz (one source, no second snapshot taken a moment later), and the
// parser is tested on CPU against a fixture (tests/fixtures/memory), which
// the live allocator's structs could not be.
#ifndef BENCHD_WORKER_MEMORY_SNAPSHOT_H_
#define BENCHD_WORKER_MEMORY_SNAPSHOT_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/memory_trace.h"

namespace benchd::worker {

// INVALID_ARGUMENT naming what is missing or of the wrong type
// ("memory snapshot: device_traces[0][12].size: expected an int, got str").
absl::StatusOr<memory::Snapshot> ParseSnapshotPickle(const std::string& bytes);

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_MEMORY_SNAPSHOT_H_
