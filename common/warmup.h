// Warm-up "auto": the stopping rule, torch-free so it is tested on its own.
//
// Warm-up steps run until the last kWarmupWindow step times are each within
// kWarmupTolerance of their median, or until the cap. The worker feeds it one
// step time at a time (in CUDA-graph mode only the replays' times, as the
// eager steps before the capture say nothing about a replay's time).
#ifndef BENCHD_COMMON_WARMUP_H_
#define BENCHD_COMMON_WARMUP_H_

#include <cstdint>
#include <vector>

namespace benchd {

inline constexpr int kWarmupWindow = 3;
inline constexpr double kWarmupTolerance = 0.02;
inline constexpr int64_t kDefaultWarmupMaxSteps = 50;

// True when `times` has at least kWarmupWindow entries and each of the last
// kWarmupWindow is within kWarmupTolerance × their median of that median
// (|t - median| <= 0.02 median). A window with a non-positive or non-finite
// median never converges.
bool WarmupWindowConverged(const std::vector<double>& times);

class AutoWarmup {
 public:
  // `max_steps`: the cap on the steps this rule sees (>= 1).
  explicit AutoWarmup(int64_t max_steps) : max_steps_(max_steps) {}

  // Records one warm-up step's time; returns true when warm-up is over
  // (converged, or the cap reached). Once over, it stays over.
  bool Add(double seconds);

  bool done() const { return done_; }
  bool converged() const { return converged_; }
  int64_t steps() const { return static_cast<int64_t>(times_.size()); }

 private:
  int64_t max_steps_;
  std::vector<double> times_;
  bool done_ = false, converged_ = false;
};

}  // namespace benchd

#endif  // BENCHD_COMMON_WARMUP_H_
