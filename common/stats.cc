#include "common/stats.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace benchd {

double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

v1::Stats ComputeStats(std::vector<double> values) {
  v1::Stats s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  double sum = 0;
  for (double v : values) sum += v;
  const double mean = sum / n;
  double sq = 0;
  for (double v : values) sq += (v - mean) * (v - mean);
  const double std = values.size() > 1 ? std::sqrt(sq / (n - 1)) : 0.0;
  s.set_count(static_cast<int64_t>(values.size()));
  s.set_mean(mean);
  s.set_std(std);
  s.set_median(Quantile(values, 0.5));
  s.set_min(values.front());
  s.set_max(values.back());
  s.set_p95(Quantile(values, 0.95));
  s.set_p99(Quantile(values, 0.99));
  s.set_cv(mean != 0 ? std / mean : 0.0);
  s.set_iqr(Quantile(values, 0.75) - Quantile(values, 0.25));
  if (values.size() >= kMinValuesForNoise && s.median() > 0) {
    const double fraction = s.iqr() / s.median();
    if (fraction > kVeryNoisyIqrFraction) {
      s.set_noise_warning(absl::StrFormat(
          "interquartile range is %.1f%% of the median (over %.0f%%): significant run-to-run "
          "variance, the median is unreliable",
          100 * fraction, 100 * kVeryNoisyIqrFraction));
    } else if (fraction > kNoisyIqrFraction) {
      s.set_noise_warning(absl::StrFormat(
          "interquartile range is %.1f%% of the median (over %.0f%%): the machine's load or "
          "clocks varied, the median may be unreliable",
          100 * fraction, 100 * kNoisyIqrFraction));
    }
  }
  return s;
}

}  // namespace benchd
