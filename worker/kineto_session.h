// LibTorch's Kineto profiler for a worker's requests (the profile request,
// and the data-parallel job's profiled step per run): a session that is
// always turned off, and its event tree as the torch-free ProfileEvents that
// common/ analyses.
#ifndef BENCHD_WORKER_KINETO_SESSION_H_
#define BENCHD_WORKER_KINETO_SESSION_H_

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/profiler/collection.h>

#include <memory>
#include <set>
#include <vector>

#include "common/profile_analysis.h"

namespace benchd::worker {

namespace prof = torch::profiler::impl;
using torch::autograd::profiler::ProfilerResult;

// Turns the profiler off on every way out of the profiled run.
class KinetoSession {
 public:
  KinetoSession(prof::ProfilerConfig config, std::set<prof::ActivityType> activities)
      : config_(std::move(config)), activities_(std::move(activities)) {
    // CUPTI's set-up happens here, before the warm-up step, not in a profiled one.
    torch::autograd::profiler::prepareProfiler(config_, activities_);
  }
  ~KinetoSession() {
    if (!on_) return;
    try {
      torch::autograd::profiler::disableProfiler();
    } catch (const std::exception&) {
      // Already failing; nothing more to save.
    }
  }
  // Once per session. Kineto traces from prepareProfiler on (its warm-up,
  // discarded), so a session is made just before what it profiles: one made
  // before measured steps slows them (xl's step read 276 ms, not 223).
  void Start() {
    torch::autograd::profiler::enableProfiler(config_, activities_);
    on_ = true;
  }
  void Stop() {
    result_ = torch::autograd::profiler::disableProfiler();
    on_ = false;
  }
  std::unique_ptr<ProfilerResult>& result() { return result_; }

 private:
  prof::ProfilerConfig config_;
  std::set<prof::ActivityType> activities_;
  bool on_ = false;
  std::unique_ptr<ProfilerResult> result_;
};

// The profiler's tree as ProfileEvents, each result once, parents before
// children. Allocation and other event kinds carry no time to attribute and
// are left out (they stay in the trace); the children of one left out hang
// from its parent.
std::vector<ProfileEvent> FlattenProfile(const std::vector<std::shared_ptr<prof::Result>>& tree);

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_KINETO_SESSION_H_
