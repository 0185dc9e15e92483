#include "common/stats.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace benchd {
namespace {

// By hand: sorted 1 2 3 10; mean 4; squared deviations 9+4+1+36 = 50, std =
// sqrt(50/3); median (2+3)/2; p95 at rank 0.95·3 = 2.85: 3 + 0.85·(10-3) = 8.95.
TEST(StatsTest, HandWorkedSeries) {
  const v1::Stats s = ComputeStats({3.0, 1.0, 2.0, 10.0});
  EXPECT_EQ(s.count(), 4);
  EXPECT_DOUBLE_EQ(s.mean(), 4.0);
  EXPECT_DOUBLE_EQ(s.std(), std::sqrt(50.0 / 3.0));
  EXPECT_DOUBLE_EQ(s.median(), 2.5);
  EXPECT_DOUBLE_EQ(s.min(), 1.0);
  EXPECT_DOUBLE_EQ(s.max(), 10.0);
  EXPECT_NEAR(s.p95(), 8.95, 1e-12);
  EXPECT_DOUBLE_EQ(s.cv(), std::sqrt(50.0 / 3.0) / 4.0);
  // p25 at rank 0.75: 1.75; p75 at rank 2.25: 3 + 0.25·7 = 4.75.
  EXPECT_DOUBLE_EQ(s.iqr(), 3.0);
  EXPECT_EQ(s.noise_warning(),
            "interquartile range is 120.0% of the median (over 25%): significant run-to-run "
            "variance, the median is unreliable");
}

// torch.utils.benchmark's rule: over 10% of the median is noisy, over 25%
// very; fewer than 4 values say nothing.
TEST(StatsTest, NoiseWarningFollowsTheInterquartileRange) {
  // iqr 0.12 of a median of 1.0 (p25 0.94, p75 1.06).
  const v1::Stats noisy = ComputeStats({0.9, 0.94, 1.0, 1.06, 1.1});
  EXPECT_NEAR(noisy.iqr(), 0.12, 1e-12);
  EXPECT_EQ(noisy.noise_warning(),
            "interquartile range is 12.0% of the median (over 10%): the machine's load or "
            "clocks varied, the median may be unreliable");
  const v1::Stats steady = ComputeStats({0.99, 1.0, 1.0, 1.01, 1.02});
  EXPECT_TRUE(steady.noise_warning().empty()) << steady.noise_warning();
  EXPECT_TRUE(ComputeStats({1.0, 2.0, 9.0}).noise_warning().empty());
}

// Step times with one outlier. Expected values from numpy 2.x:
//   x.mean(), x.std(ddof=1), np.median(x), np.percentile(x, 95), std/mean.
TEST(StatsTest, MatchesNumpy) {
  const std::vector<double> x = {0.012, 0.010, 0.011, 0.015, 0.013,
                                 0.030, 0.012, 0.014, 0.011, 0.016};
  const v1::Stats s = ComputeStats(x);
  EXPECT_EQ(s.count(), 10);
  EXPECT_NEAR(s.mean(), 0.014400000000000001, 1e-15);
  EXPECT_NEAR(s.std(), 0.005796550698475775, 1e-15);
  EXPECT_NEAR(s.median(), 0.0125, 1e-15);
  EXPECT_DOUBLE_EQ(s.min(), 0.010);
  EXPECT_DOUBLE_EQ(s.max(), 0.030);
  EXPECT_NEAR(s.p95(), 0.023699999999999985, 1e-15);
  EXPECT_NEAR(s.cv(), 0.4025382429497065, 1e-12);
  // np.percentile(x, 75) - np.percentile(x, 25)
  EXPECT_NEAR(s.iqr(), 0.0035, 1e-15);
}

TEST(StatsTest, OneValue) {
  const v1::Stats s = ComputeStats({0.25});
  EXPECT_EQ(s.count(), 1);
  EXPECT_DOUBLE_EQ(s.mean(), 0.25);
  EXPECT_DOUBLE_EQ(s.std(), 0.0);
  EXPECT_DOUBLE_EQ(s.median(), 0.25);
  EXPECT_DOUBLE_EQ(s.min(), 0.25);
  EXPECT_DOUBLE_EQ(s.max(), 0.25);
  EXPECT_DOUBLE_EQ(s.p95(), 0.25);
  EXPECT_DOUBLE_EQ(s.cv(), 0.0);
}

TEST(StatsTest, EmptyIsAllZero) {
  const v1::Stats s = ComputeStats({});
  EXPECT_EQ(s.count(), 0);
  EXPECT_EQ(s.mean(), 0.0);
  EXPECT_EQ(s.std(), 0.0);
  EXPECT_EQ(s.median(), 0.0);
  EXPECT_EQ(s.min(), 0.0);
  EXPECT_EQ(s.max(), 0.0);
  EXPECT_EQ(s.p95(), 0.0);
  EXPECT_EQ(s.cv(), 0.0);
}

TEST(StatsTest, ZeroMeanGivesZeroCv) {
  const v1::Stats s = ComputeStats({-1.0, 1.0});
  EXPECT_DOUBLE_EQ(s.mean(), 0.0);
  EXPECT_DOUBLE_EQ(s.std(), std::sqrt(2.0));
  EXPECT_EQ(s.cv(), 0.0);
}

TEST(QuantileTest, Endpoints) {
  const std::vector<double> sorted = {1.0, 2.0, 4.0};
  EXPECT_DOUBLE_EQ(Quantile(sorted, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(Quantile(sorted, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(Quantile(sorted, 0.75), 3.0);  // rank 1.5
  EXPECT_EQ(Quantile({}, 0.5), 0.0);
}

}  // namespace
}  // namespace benchd
