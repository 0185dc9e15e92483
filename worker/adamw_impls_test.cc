// The foreach, fused and capturable AdamW paths against the faithful loop:
// the same update (within float32 rounding), one shared state, and torch's
// own AdamW shown to be a different update.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "worker/adamw.h"

namespace benchd::worker {
namespace {

// Parameters of a few shapes, and per step gradients whose scales run from
// 1e-7 to 1 (so some coordinates have sqrt(v) near eps, where the placement
// of eps matters).
struct Problem {
  std::vector<torch::Tensor> init;
  std::vector<std::vector<torch::Tensor>> grads;  // [step][param]
};

Problem MakeProblem(int steps) {
  torch::manual_seed(11);
  Problem pr;
  const std::vector<std::vector<int64_t>> shapes = {{64, 32}, {32}, {1000}, {7, 3, 5}};
  for (const auto& shape : shapes) pr.init.push_back(torch::randn(shape) * 0.05);
  for (int s = 0; s < steps; ++s) {
    std::vector<torch::Tensor> g;
    for (const auto& p : pr.init) {
      // log10 of the scale uniform in [-7, 0], sign random.
      const torch::Tensor scale = torch::pow(10.0, torch::rand(p.sizes()) * -7.0);
      g.push_back(torch::randn(p.sizes()).sign() * scale);
    }
    pr.grads.push_back(std::move(g));
  }
  return pr;
}

std::vector<torch::Tensor> Params(const Problem& pr) {
  std::vector<torch::Tensor> out;
  for (const auto& p : pr.init) out.push_back(p.clone().requires_grad_(true));
  return out;
}

using StepFn = std::function<void(AdamW&)>;

std::string Sci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

// Runs the steps, choosing the path of step s with step_fn(s).
std::vector<torch::Tensor> RunSteps(const Problem& pr, const std::function<StepFn(int)>& step_fn) {
  std::vector<torch::Tensor> params = Params(pr);
  AdamW opt(params);
  for (size_t s = 0; s < pr.grads.size(); ++s) {
    for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = pr.grads[s][i].clone();
    step_fn(static_cast<int>(s))(opt);
  }
  std::vector<int64_t> expected(params.size(), static_cast<int64_t>(pr.grads.size()));
  EXPECT_EQ(opt.Steps(), expected);
  return params;
}

const StepFn kFaithful = [](AdamW& o) { o.Step(); };
const StepFn kForeach = [](AdamW& o) { o.StepForeach(); };
const StepFn kFused = [](AdamW& o) { o.StepFused(); };
const StepFn kCapturable = [](AdamW& o) { o.StepForeachCapturable(); };

// max |a - b| / (|a| + 1e-3): relative where the weights are (~0.05), and
// absolute (scaled) for the few near zero.
double MaxRelDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const torch::Tensor x = a[i].detach().to(torch::kFloat64);
    const torch::Tensor y = b[i].detach().to(torch::kFloat64);
    worst = std::max(worst, ((x - y).abs() / (x.abs() + 1e-3)).max().item<double>());
  }
  return worst;
}

double MaxAbsMove(const Problem& pr, const std::vector<torch::Tensor>& after) {
  double worst = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    worst = std::max(worst, (after[i].detach() - pr.init[i]).abs().max().item<double>());
  }
  return worst;
}

TEST(AdamWImplsTest, EveryPathGivesTheFaithfulParametersAfterThreeSteps) {
  const Problem pr = MakeProblem(3);
  const auto faithful = RunSteps(pr, [](int) { return kFaithful; });
  // The weights did move (about lr per step), so agreeing is not vacuous.
  EXPECT_GT(MaxAbsMove(pr, faithful), 2e-3);
  for (const auto& [name, fn] : std::vector<std::pair<std::string, StepFn>>{
           {"foreach", kForeach}, {"fused", kFused}, {"capturable", kCapturable}}) {
    const auto other = RunSteps(pr, [&](int) { return fn; });
    const double diff = MaxRelDiff(faithful, other);
    EXPECT_LT(diff, 1e-6) << name;
    RecordProperty(name + "_max_rel_diff", Sci(diff));
  }
}

TEST(AdamWImplsTest, PathsShareOneStateAcrossSteps) {
  // Switching path every step (as jobs on one resident model may) is the
  // same as the faithful loop all along: m, v and t are one state, and the
  // device step tensors are refreshed after host-only steps.
  const Problem pr = MakeProblem(6);
  const auto faithful = RunSteps(pr, [](int) { return kFaithful; });
  const std::vector<StepFn> order = {kFused, kFaithful, kCapturable, kForeach, kFused, kCapturable};
  const auto mixed = RunSteps(pr, [&](int s) { return order[s]; });
  EXPECT_LT(MaxRelDiff(faithful, mixed), 1e-6);
}

TEST(AdamWImplsTest, TorchsOwnFusedAdamWIsADifferentUpdate) {
  // at::_fused_adamw_ as torch.optim.AdamW(fused=True) calls it: decay
  // before the step and eps after the bias correction (adamw_impls.cc).
  const Problem pr = MakeProblem(3);
  const auto faithful = RunSteps(pr, [](int) { return kFaithful; });
  std::vector<torch::Tensor> p = Params(pr), m, v, steps;
  for (const auto& x : p) {
    m.push_back(torch::zeros_like(x));
    v.push_back(torch::zeros_like(x));
    steps.push_back(torch::zeros({}));
  }
  torch::NoGradGuard no_grad;
  for (size_t s = 0; s < pr.grads.size(); ++s) {
    at::_foreach_add_(steps, 1.0);
    at::_fused_adamw_(p, pr.grads[s], m, v, {}, steps, 1e-3, 0.9, 0.999, 0.01, 1e-8, false, false);
  }
  // Far outside the tolerance the course-exact paths meet.
  const double diff = MaxRelDiff(faithful, p);
  EXPECT_GT(diff, 1e-4);
  RecordProperty("torch_fused_adamw_max_rel_diff", Sci(diff));
}

TEST(AdamWImplsTest, ParametersWithoutGradientsAreSkippedByEveryPath) {
  for (const StepFn& fn : {kForeach, kFused, kCapturable}) {
    auto a = torch::ones({4}, torch::TensorOptions().requires_grad(true));
    auto b = torch::ones({6}, torch::TensorOptions().requires_grad(true));
    AdamW opt({a, b});
    a.mutable_grad() = torch::ones({4});
    fn(opt);
    EXPECT_TRUE(torch::equal(b.detach(), torch::ones({6})));
    EXPECT_FALSE(torch::equal(a.detach(), torch::ones({4})));
    EXPECT_EQ(opt.StateBytes(), 2 * 4 * 4);
    EXPECT_EQ(opt.Steps(), (std::vector<int64_t>{1, 0}));
  }
}

TEST(AdamWImplsTest, WeightCopiesGiveTheFaithfulUpdateFromTheCopiesGradients) {
  // Three parameters with bf16 copies, one without. The copies' gradients are
  // bf16; the faithful loop given the same gradients in fp32 is the reference.
  const Problem pr = MakeProblem(3);
  const auto bf16_grad = [&](size_t s, size_t i) { return pr.grads[s][i].to(at::kBFloat16); };
  std::vector<torch::Tensor> faithful = Params(pr);
  AdamW reference(faithful);
  std::vector<torch::Tensor> params = Params(pr), copies;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs;
  for (size_t i = 0; i < 3; ++i) {
    copies.push_back(params[i].detach().to(at::kBFloat16).requires_grad_(true));
    pairs.emplace_back(params[i], copies.back());
  }
  AdamW opt(params);
  opt.SetWeightCopies(pairs);
  for (size_t s = 0; s < pr.grads.size(); ++s) {
    for (size_t i = 0; i < params.size(); ++i) {
      faithful[i].mutable_grad() = i < 3 ? bf16_grad(s, i).to(at::kFloat) : pr.grads[s][i].clone();
      if (i < 3) {
        copies[i].mutable_grad() = bf16_grad(s, i);
      } else {
        params[i].mutable_grad() = pr.grads[s][i].clone();
      }
    }
    reference.Step();
    opt.StepFused();
  }
  EXPECT_EQ(opt.Steps(), std::vector<int64_t>(params.size(), 3));
  EXPECT_GT(MaxAbsMove(pr, params), 2e-3);
  EXPECT_LT(MaxRelDiff(faithful, params), 1e-6);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(torch::equal(copies[i], params[i].detach().to(at::kBFloat16))) << i;
  }

  // The other paths cannot read the copies' gradients, and say so.
  EXPECT_THROW(opt.Step(), c10::Error);
  EXPECT_THROW(opt.StepForeach(), c10::Error);
  EXPECT_THROW(opt.StepForeachCapturable(), c10::Error);
  // Without copies the parameters' own gradients are used again.
  opt.SetWeightCopies({});
  for (auto& p : params) p.mutable_grad() = torch::ones_like(p);
  opt.Step();
  EXPECT_EQ(opt.Steps(), std::vector<int64_t>(params.size(), 4));
}

TEST(AdamWImplsTest, WeightCopiesMustMatchTheirParameters) {
  auto a = torch::ones({4}, torch::TensorOptions().requires_grad(true));
  AdamW opt({a});
  auto stranger = torch::ones({4}, torch::TensorOptions().requires_grad(true));
  EXPECT_THROW(opt.SetWeightCopies({{stranger, stranger.to(at::kBFloat16)}}), c10::Error);
  EXPECT_THROW(opt.SetWeightCopies({{a, torch::ones({5}, at::kBFloat16)}}), c10::Error);
  EXPECT_THROW(opt.SetWeightCopies({{a, torch::ones({4}, at::kDouble)}}), c10::Error);
}

TEST(AdamWImplsTest, SyncHostStepsKeepsAgreeingCounts) {
  const Problem pr = MakeProblem(2);
  std::vector<torch::Tensor> params = Params(pr);
  AdamW opt(params);
  for (size_t s = 0; s < 2; ++s) {
    for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = pr.grads[s][i].clone();
    opt.StepForeachCapturable();
  }
  opt.SyncHostSteps();
  EXPECT_EQ(opt.Steps(), std::vector<int64_t>(params.size(), 2));
  // A host-only step makes the device counts stale; syncing must not take them back.
  opt.Step();
  opt.SyncHostSteps();
  EXPECT_EQ(opt.Steps(), std::vector<int64_t>(params.size(), 3));
}

// The overlapped step (optimizer_overlap) against StepFused, on the CPU in
// fp32: parameters reported in the backward's order (last first), one never
// reported (End updates it), one without a gradient in a step (its t must not
// move); then with bf16 weight copies. The same bits, t and state.
TEST(AdamWImplsTest, OverlappedStepIsTheFusedStepBitForBit) {
  const Problem pr = MakeProblem(4);
  auto run = [&](bool overlapped, bool copies) {
    std::vector<torch::Tensor> params = Params(pr);
    AdamW opt(params);
    std::vector<torch::Tensor> leaves = params;
    if (copies) {
      std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs;
      for (size_t i = 0; i < 2; ++i) {  // copies for the first two; the rest fp32
        params[i].requires_grad_(false);
        leaves[i] = params[i].detach().to(at::kBFloat16).requires_grad_(true);
        pairs.emplace_back(params[i], leaves[i]);
      }
      opt.SetWeightCopies(pairs);
    }
    for (size_t s = 0; s < pr.grads.size(); ++s) {
      for (size_t i = 0; i < params.size(); ++i) {
        // Step 2 leaves parameter 1 without a gradient.
        leaves[i].mutable_grad() =
            s == 2 && i == 1 ? torch::Tensor() : pr.grads[s][i].to(leaves[i].scalar_type());
      }
      if (!overlapped) {
        opt.StepFused();
        continue;
      }
      opt.BeginOverlappedStep();
      for (size_t i = leaves.size(); i-- > 1;) opt.OverlappedUpdate(leaves[i]);  // 0: by End
      opt.OverlappedUpdate(leaves[3]);  // a second report changes nothing
      opt.EndOverlappedStep();
    }
    return std::make_pair(params, opt.Steps());
  };
  for (bool copies : {false, true}) {
    SCOPED_TRACE(copies ? "weight copies" : "fp32");
    const auto [fused, fused_steps] = run(false, copies);
    const auto [overlapped, overlapped_steps] = run(true, copies);
    EXPECT_GT(MaxAbsMove(pr, fused), 2e-3);
    EXPECT_EQ(fused_steps, (std::vector<int64_t>{4, 3, 4, 4}));
    EXPECT_EQ(overlapped_steps, fused_steps);
    for (size_t i = 0; i < fused.size(); ++i) {
      EXPECT_TRUE(torch::equal(overlapped[i], fused[i])) << i;
    }
  }
}

}  // namespace
}  // namespace benchd::worker
