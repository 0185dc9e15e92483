// What `benchctl submit memory --watch` and `benchctl get` print for a memory job: the peak
// table (one row per run: the seeds' peak-memory table), then per run the
// phases and the largest allocations; and where the pictures go.
#ifndef BENCHD_CLIENT_MEMORY_VIEW_H_
#define BENCHD_CLIENT_MEMORY_VIEW_H_

#include <string>

#include "benchd/v1/bench.pb.h"

namespace benchd::client {

// "none", "cpp", "all".
std::string MemoryStacksName(v1::MemoryStacks s);

// One row per run: run, peak allocated, peak reserved, resident before
// recording, forward/backward/optimizer peaks, one activation; OOM rows say
// so with the allocated/reserved figures at the failure.
std::string MemoryPeakTable(const v1::MemoryResult& r, const std::string& indent = "");
// The whole report.
std::string MemoryResultView(const v1::MemoryResult& r);
// "small forward/train_step fp32/bf16 ctx 128,256 (6 runs)".
std::string MemorySpecSummary(const v1::MemorySpec& m);

// The local file name a run's timeline is saved under by `benchctl submit memory --watch`:
// <job>-timeline.svg, or <job>-timeline-<run>.svg in a sweep.
std::string TimelineFileName(const std::string& job_id, const v1::MemoryResult& r, int run);

}  // namespace benchd::client

#endif  // BENCHD_CLIENT_MEMORY_VIEW_H_
