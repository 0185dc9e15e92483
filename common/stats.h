// Summary statistics over a series of durations.
#ifndef BENCHD_COMMON_STATS_H_
#define BENCHD_COMMON_STATS_H_

#include <vector>

#include "benchd/v1/bench.pb.h"

namespace benchd {

// An interquartile range above these fractions of the median makes the
// median unreliable: torch.utils.benchmark's thresholds (its Measurement
// warns likewise), so the two tools call the same series noisy.
inline constexpr double kNoisyIqrFraction = 0.10;
inline constexpr double kVeryNoisyIqrFraction = 0.25;
inline constexpr int kMinValuesForNoise = 4;

// count, mean, sample std (n-1; 0 for one value), median, min, max, p95, p99,
// iqr (linear interpolation between closest ranks, as numpy's default), cv
// (std/mean; 0 when the mean is 0) and noise_warning (see v1::Stats). All
// zero for an empty series.
v1::Stats ComputeStats(std::vector<double> values);

// The q-quantile (0..1) of sorted values, numpy's "linear" method.
double Quantile(const std::vector<double>& sorted, double q);

}  // namespace benchd

#endif  // BENCHD_COMMON_STATS_H_
