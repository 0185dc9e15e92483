// A CUDA caching allocator snapshot as plain C++ data: what
// torch::cuda::_memory_snapshot_pickled() writes (and memory_viz reads),
// after the worker has unpickled it (worker/memory_snapshot.cc). Torch-free,
// so the analysis and the timeline picture built on it are tested in CI from
// a fixture (tests/fixtures/memory/).
//
// The pickle (torch 2.11) is a dict:
//   segments: [{device, address, total_size, allocated_size, active_size,
//               requested_size, stream, segment_type, segment_pool_id,
//               is_expandable, frames, blocks: [{address, size,
//               requested_size, state, frames}]}]
//   device_traces: one list per device of {action, addr (device_free for
//               oom), size, stream, compile_context, user_metadata, time_us,
//               pool_id, frames?}; action is alloc, free_requested,
//               free_completed, segment_alloc, segment_free, segment_map,
//               segment_unmap, snapshot or oom
//   external_annotations: [{name, stage: START|END, device, time_us}], one
//               per RecordFunction user scope entered or left while
//               recording
//   allocator_settings, host_segments, host_traces
// Frames are {name, filename, line}, innermost first.
#ifndef BENCHD_COMMON_MEMORY_TRACE_H_
#define BENCHD_COMMON_MEMORY_TRACE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace benchd::memory {

struct Frame {
  std::string name;
  std::string filename;
  int64_t line = 0;
};
// Shared: the allocator deduplicates stacks, and so does the parser.
using Frames = std::shared_ptr<const std::vector<Frame>>;

enum class Action {
  kAlloc,
  kFreeRequested,
  kFreeCompleted,
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kSnapshot,
  kOom,
  kOther,
};

struct TraceEvent {
  Action action = Action::kOther;
  int64_t addr = 0;
  int64_t size = 0;  // requested bytes (alloc/free), or the segment's size
  int64_t time_us = 0;
  int64_t device_free = 0;  // oom only
  Frames frames;            // may be null
};

struct Annotation {
  std::string name;
  bool start = true;  // stage START (else END)
  int device = 0;
  int64_t time_us = 0;
};

struct Block {
  int64_t size = 0;
  int64_t requested_size = 0;
  std::string state;  // active_allocated, active_pending_free, inactive
};

struct Segment {
  int device = 0;
  int64_t address = 0;
  int64_t total_size = 0;
  std::vector<Block> blocks;
};

struct Snapshot {
  std::vector<Segment> segments;
  std::vector<std::vector<TraceEvent>> device_traces;  // index = device
  std::vector<Annotation> annotations;
};

}  // namespace benchd::memory

#endif  // BENCHD_COMMON_MEMORY_TRACE_H_
