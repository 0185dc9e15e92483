#include "common/warmup.h"

#include <algorithm>
#include <cmath>

namespace benchd {

bool WarmupWindowConverged(const std::vector<double>& times) {
  if (times.size() < static_cast<size_t>(kWarmupWindow)) return false;
  std::vector<double> window(times.end() - kWarmupWindow, times.end());
  std::vector<double> sorted = window;
  std::sort(sorted.begin(), sorted.end());
  static_assert(kWarmupWindow % 2 == 1, "an odd window: the median is the middle value");
  const double median = sorted[kWarmupWindow / 2];
  if (!std::isfinite(median) || median <= 0) return false;
  for (double t : window) {
    if (!(std::abs(t - median) <= kWarmupTolerance * median)) return false;  // NaN fails too
  }
  return true;
}

bool AutoWarmup::Add(double seconds) {
  if (done_) return true;
  times_.push_back(seconds);
  if (WarmupWindowConverged(times_)) {
    converged_ = done_ = true;
  } else if (steps() >= max_steps_) {
    done_ = true;
  }
  return done_;
}

}  // namespace benchd
