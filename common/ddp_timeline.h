// A data-parallel step's timeline (DdpTimeline), from the profiled step's
// events, and the request's picture of every run's timelines (one SVG: a
// block per run, two lanes per rank, one time scale for all), so overlap or
// its absence shows at a glance, as the write-up's profiler screenshots.
// Torch-free: the worker feeds it Kineto's events, the daemon draws.
#ifndef BENCHD_COMMON_DDP_TIMELINE_H_
#define BENCHD_COMMON_DDP_TIMELINE_H_

#include <string>
#include <vector>

#include "benchd/v1/bench.pb.h"
#include "common/profile_analysis.h"

namespace benchd {

// `device`: the lanes are CUPTI's kernels, memcpys and memsets (nccl* ones
// are communication); else the operators at the top of each host thread's
// stack are computation and gloo:* ranges (issue to completion)
// communication. Spans merged at step/1000; the seconds exact.
v1::DdpTimeline DdpTimelineFromEvents(const std::vector<ProfileEvent>& events, bool device);

// The job's picture: every row (the compute-only run first) with its ranks'
// timelines; rows without timelines are left out. Empty when none has one.
std::string RenderDdpTimelines(const v1::DdpResult& result);

}  // namespace benchd

#endif  // BENCHD_COMMON_DDP_TIMELINE_H_
