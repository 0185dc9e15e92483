// The warm-up "auto" stopping rule on hand-made series of step times.
#include "common/warmup.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace benchd {
namespace {

TEST(WarmupWindowTest, NeedsThreeTimes) {
  EXPECT_FALSE(WarmupWindowConverged({}));
  EXPECT_FALSE(WarmupWindowConverged({1.0}));
  EXPECT_FALSE(WarmupWindowConverged({1.0, 1.0}));
  EXPECT_TRUE(WarmupWindowConverged({1.0, 1.0, 1.0}));
}

TEST(WarmupWindowTest, EachWithinTwoPercentOfTheMedian) {
  // Median 1.00: 0.9801 and 1.0199 are just inside 2%, 0.979 and 1.021 outside.
  EXPECT_TRUE(WarmupWindowConverged({0.9801, 1.00, 1.0199}));
  EXPECT_TRUE(WarmupWindowConverged({1.0199, 0.9801, 1.00}));  // order does not matter
  EXPECT_FALSE(WarmupWindowConverged({0.979, 1.00, 1.01}));
  EXPECT_FALSE(WarmupWindowConverged({0.99, 1.00, 1.021}));
  // The median is the middle value, not the mean: {1.0, 1.0, 1.021} has median 1.0.
  EXPECT_FALSE(WarmupWindowConverged({1.0, 1.0, 1.021}));
  EXPECT_TRUE(WarmupWindowConverged({1.0, 1.0, 1.019}));
}

TEST(WarmupWindowTest, OnlyTheLastThreeCount) {
  EXPECT_TRUE(WarmupWindowConverged({50.0, 9.0, 2.0, 1.0, 1.01, 0.99}));
  EXPECT_FALSE(WarmupWindowConverged({1.0, 1.0, 1.0, 1.0, 1.5}));
}

TEST(WarmupWindowTest, DegenerateTimesNeverConverge) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(WarmupWindowConverged({0.0, 0.0, 0.0}));
  EXPECT_FALSE(WarmupWindowConverged({1.0, nan, 1.0}));
  EXPECT_FALSE(WarmupWindowConverged({inf, inf, inf}));
  EXPECT_FALSE(WarmupWindowConverged({-1.0, -1.0, -1.0}));
}

TEST(AutoWarmupTest, StopsAtTheFirstConvergedWindow) {
  // A first step 10x slower, then settling. {1.05, 1.0, 1.01} is not yet in
  // (1.05 is 4% above the median 1.01); {1.0, 1.01, 0.995} is, at step 6.
  AutoWarmup w(50);
  const std::vector<double> times = {10.0, 1.2, 1.05, 1.0, 1.01, 0.995, 1.0};
  int stopped_after = 0;
  for (double t : times) {
    ++stopped_after;
    if (w.Add(t)) break;
  }
  EXPECT_EQ(stopped_after, 6);
  EXPECT_EQ(w.steps(), 6);
  EXPECT_TRUE(w.done());
  EXPECT_TRUE(w.converged());
}

TEST(AutoWarmupTest, TheCapStopsANoisyWarmup) {
  AutoWarmup w(5);
  const std::vector<double> times = {1.0, 2.0, 1.0, 2.0, 1.0, 2.0};
  int stopped_after = 0;
  for (double t : times) {
    ++stopped_after;
    if (w.Add(t)) break;
  }
  EXPECT_EQ(stopped_after, 5);
  EXPECT_EQ(w.steps(), 5);
  EXPECT_TRUE(w.done());
  EXPECT_FALSE(w.converged());
  // Done stays done; no more times are taken.
  EXPECT_TRUE(w.Add(1.0));
  EXPECT_EQ(w.steps(), 5);
}

TEST(AutoWarmupTest, ConvergingExactlyAtTheCapCountsAsConverged) {
  AutoWarmup w(3);
  EXPECT_FALSE(w.Add(1.0));
  EXPECT_FALSE(w.Add(1.0));
  EXPECT_TRUE(w.Add(1.0));
  EXPECT_TRUE(w.converged());
  EXPECT_EQ(w.steps(), 3);
}

TEST(AutoWarmupTest, SteadyTimesStopAfterExactlyThree) {
  AutoWarmup w(50);
  EXPECT_FALSE(w.Add(0.5));
  EXPECT_FALSE(w.Add(0.5));
  EXPECT_TRUE(w.Add(0.505));
  EXPECT_TRUE(w.converged());
}

}  // namespace
}  // namespace benchd
