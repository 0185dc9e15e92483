// AdamW against updates worked out by hand from the course's formulas.
#include "worker/adamw.h"

#include <gtest/gtest.h>

namespace benchd::worker {
namespace {

TEST(AdamWTest, TwoStepsMatchHandComputedUpdates) {
  auto p = torch::tensor({1.0}, torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true));
  AdamW opt({p});

  // Step 1, g = 0.5: m = 0.05, v = 0.00025,
  // alpha_1 = 1e-3 sqrt(1 - 0.999) / (1 - 0.9) = 3.16227766e-4,
  // p = 1 - alpha_1 * 0.05 / (sqrt(0.00025) + 1e-8) = 0.99900000063,
  // then p -= 1e-3 * 0.01 * p  ->  0.99899001063.
  p.mutable_grad() = torch::tensor({0.5}, torch::kFloat64);
  opt.Step();
  EXPECT_NEAR(p.item<double>(), 0.9989900106324487, 1e-12);

  // Step 2, g = -1: m = 0.9*0.05 - 0.1 = -0.055, v = 0.999*0.00025 + 0.001 = 0.00124975,
  // alpha_2 = 1e-3 sqrt(1 - 0.999^2) / (1 - 0.9^2) = 2.35316739e-4,
  // p += alpha_2 * 0.055 / (sqrt(0.00124975) + 1e-8), then the decay.
  p.mutable_grad() = torch::tensor({-1.0}, torch::kFloat64);
  opt.Step();
  EXPECT_NEAR(p.item<double>(), 0.999346120494784, 1e-12);
}

TEST(AdamWTest, FirstStepMovesEveryWeightByAboutLr) {
  // With bias correction the first update is lr * g/|g| (eps aside) whatever
  // the gradient's scale, plus the decay lr*wd*p.
  auto p = torch::tensor({2.0f, -3.0f, 0.5f}, torch::TensorOptions().requires_grad(true));
  AdamW opt({p});
  p.mutable_grad() = torch::tensor({1e-3f, -50.0f, 7.0f});
  opt.Step();
  const auto expected = torch::tensor(
      {(2.0 - 1e-3) * (1 - 1e-5), (-3.0 + 1e-3) * (1 - 1e-5), (0.5 - 1e-3) * (1 - 1e-5)},
      torch::kFloat32);
  EXPECT_TRUE(torch::allclose(p.detach(), expected, /*rtol=*/0, /*atol=*/1e-6)) << p << expected;
}

TEST(AdamWTest, SkipsParametersWithoutGradientsAndCountsState) {
  auto a = torch::ones({4}, torch::TensorOptions().requires_grad(true));
  auto b = torch::ones({6}, torch::TensorOptions().requires_grad(true));
  AdamW opt({a, b});
  EXPECT_EQ(opt.StateBytes(), 0);  // allocated at the first step, as the course does
  a.mutable_grad() = torch::ones({4});
  opt.Step();
  EXPECT_TRUE(torch::equal(b.detach(), torch::ones({6})));
  EXPECT_FALSE(torch::equal(a.detach(), torch::ones({4})));
  EXPECT_EQ(opt.StateBytes(), 2 * 4 * 4);  // m and v for `a` only, fp32
}

}  // namespace
}  // namespace benchd::worker
