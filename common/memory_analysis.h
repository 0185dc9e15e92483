// The numbers of a memory request, computed from a snapshot's trace
// (common/memory_trace.h): peak allocated and reserved bytes overall and per
// phase, memory at the start of each phase, and the largest allocations with
// their phase and stack.
//
// Accounting is memory_viz's "Active Memory Timeline": an alloc adds its size
// as the trace records it (the requested bytes, not the block rounded up to
// 512 B: torch.cuda.memory_stats' requested_bytes, not allocated_bytes), a
// free_completed takes it away (free_requested only marks it); a
// segment_alloc / segment_map adds to reserved, segment_free / segment_unmap
// takes away. What was resident before the first recorded event (weights,
// optimizer state) is the baseline: the bytes the snapshot's segments hold at
// its end minus the trace's net change.
//
// Phases come from the snapshot's external_annotations (one START and one
// END per RecordFunction user scope). An event belongs to the innermost
// phase whose [START, END] holds its time; times are in microseconds, so an
// event in the same microsecond as a boundary goes to the later phase.
#ifndef BENCHD_COMMON_MEMORY_ANALYSIS_H_
#define BENCHD_COMMON_MEMORY_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/memory_trace.h"

namespace benchd::memory {

inline constexpr const char* kPhaseNames[] = {"forward", "backward", "optimizer_step"};

struct PhaseStats {
  std::string name;
  bool seen = false;            // the phase ran while recording
  int64_t start_allocated = 0;  // at its first start
  int64_t start_reserved = 0;
  int64_t peak_allocated = 0;  // over every occurrence
  int64_t peak_reserved = 0;
};

struct PhaseInterval {
  std::string name;
  int64_t start_us = 0, end_us = 0;
};

struct LargeAllocation {
  int64_t size = 0;
  std::string phase;
  int64_t count = 0;
  std::vector<std::string> frames;  // "file:line:function", innermost first
  std::string origin;               // innermost frame naming origin_marker
};

struct AnalysisOptions {
  int device = -1;  // -1: the only device with a trace
  int top_allocations = 10;
  size_t max_frames = 16;
  // A frame whose function names this is "ours" (MemoryAllocation.origin).
  std::string origin_marker = "benchd::";
};

struct Analysis {
  int device = 0;
  int64_t entries = 0;  // trace events of that device
  int64_t baseline_allocated = 0, baseline_reserved = 0;
  int64_t final_allocated = 0, final_reserved = 0;
  int64_t peak_allocated = 0, peak_reserved = 0;
  std::vector<PhaseStats> phases;        // kPhaseNames, in that order
  std::vector<PhaseInterval> intervals;  // every annotated scope, by start time
  std::vector<LargeAllocation> largest;
  // Per trace event of the device: allocated and reserved after it, and the
  // phase it belongs to ("" outside every phase).
  std::vector<int64_t> allocated_after, reserved_after;
  std::vector<std::string> phase_of;
};

// INVALID_ARGUMENT when the snapshot has no trace for the device, or when it
// contradicts itself (a free of more than was allocated).
absl::StatusOr<Analysis> Analyze(const Snapshot& snapshot, const AnalysisOptions& options = {});

// memory_viz's frame format and filter (torch/cuda/_memory_viz.py
// _frame_fmt / _frame_filter): "file:line:function" with the file's last
// path component; false for unwinder, interpreter and dispatcher frames.
std::string FormatFrame(const Frame& f);
bool KeepFrame(const Frame& f);

}  // namespace benchd::memory

#endif  // BENCHD_COMMON_MEMORY_ANALYSIS_H_
