// ExplicitStep against the autograd engine on the same model and batch: the
// same loss and logits (the same forward ops), and every parameter's gradient
// equal to float rounding, in fp32 and under bf16 autocast; and its refusals.
#include "worker/explicit_step.h"

#include <gtest/gtest.h>

#include <ATen/record_function.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/model_config.h"
#include "worker/autocast_guard.h"
#include "worker/test_model.h"

namespace benchd::worker {
namespace {

using testing::ResolvedPreset;

const auto kCpu = torch::TensorOptions().dtype(torch::kFloat32);

struct Step {
  torch::Tensor loss, logits;
  std::map<std::string, torch::Tensor> grads;
};

std::map<std::string, torch::Tensor> Grads(TransformerLM& lm) {
  std::map<std::string, torch::Tensor> grads;
  for (const auto& p : lm->named_parameters()) {
    grads[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : torch::Tensor();
  }
  return grads;
}

// One step through autograd, on the device of `ids`, under `autocast` if set.
Step AutogradStep(TransformerLM& lm, const torch::Tensor& ids, const torch::Tensor& targets,
                  std::optional<at::ScalarType> autocast) {
  Step s;
  {
    AutocastGuard guard(ids.device().type(), autocast);
    s.logits = lm(ids);
    s.loss = CrossEntropy(s.logits, targets);
  }
  s.loss.backward();
  s.grads = Grads(lm);
  s.loss = s.loss.detach();
  s.logits = s.logits.detach();
  return s;
}

Step ExplicitStepOf(TransformerLM& lm, const torch::Tensor& ids, const torch::Tensor& targets,
                    std::optional<at::ScalarType> autocast) {
  Step s;
  ExplicitStep step(*lm);
  {
    AutocastGuard guard(ids.device().type(), autocast);
    s.loss = step.Forward(ids, targets, /*keep_for_backward=*/true, &s.logits);
  }
  step.Backward();
  s.grads = Grads(lm);
  return s;
}

// max |a - b| over max |b|, so a tolerance reads as relative to the tensor's scale.
double RelativeError(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = b.abs().max().item<double>();
  const double diff = (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
  return scale == 0 ? diff : diff / scale;
}

void ExpectSameStep(const Step& explicit_step, const Step& autograd, double grad_tol) {
  // The forward runs the same ops in the same order: bit for bit.
  EXPECT_TRUE(torch::equal(explicit_step.loss, autograd.loss))
      << explicit_step.loss.item<double>() << " vs " << autograd.loss.item<double>();
  EXPECT_TRUE(torch::equal(explicit_step.logits, autograd.logits));
  ASSERT_EQ(explicit_step.grads.size(), autograd.grads.size());
  for (const auto& [name, want] : autograd.grads) {
    const torch::Tensor& got = explicit_step.grads.at(name);
    ASSERT_TRUE(want.defined()) << name;
    ASSERT_TRUE(got.defined()) << name << ": no gradient from the explicit backward";
    EXPECT_EQ(got.scalar_type(), want.scalar_type()) << name;
    EXPECT_EQ(got.sizes(), want.sizes()) << name;
    EXPECT_EQ(got.strides(), want.strides()) << name;
    EXPECT_GT(want.abs().max().item<double>(), 0) << name << ": autograd's gradient is all zero";
    EXPECT_LE(RelativeError(got, want), grad_tol) << name;
  }
}

// The operators that do work (the kernels on a GPU), as a count per name: each
// aten operator seen by RecordFunction below which no other counted operator
// ran, less those that only make views or allocate (no kernel). The engine's
// own records (a node's evaluate_function) count for nothing themselves.
// Records every thread, as autograd's engine may run the backward on its own.
class ComputeOpCounter {
 public:
  ComputeOpCounter() {
    handle_ = at::addGlobalCallback(
        at::RecordFunctionCallback(
            [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
              Stack().push_back({fn.name(), false});
              return nullptr;
            },
            [](const at::RecordFunction&, at::ObserverContext*) {
              auto& stack = Stack();
              const auto [name, work_below] = stack.back();
              stack.pop_back();
              const bool work = name.rfind("aten::", 0) == 0 && !NoWork().count(name);
              if (work && !work_below) {
                std::lock_guard<std::mutex> lock(Mutex());
                // One kernel either way. Summing two gradients, the engine adds
                // out of place while it still holds another reference to one of
                // them (AddBackward hands one tensor to both inputs), which the
                // explicit step, consuming in its own order, may not.
                ++Counts()[name == "aten::add_" ? "aten::add" : name];
              }
              if ((work || work_below) && !stack.empty()) stack.back().second = true;
            })
            .scopes({at::RecordScope::FUNCTION}));
  }
  ~ComputeOpCounter() { at::removeCallback(handle_); }
  std::map<std::string, int> Take() {
    std::lock_guard<std::mutex> lock(Mutex());
    return std::exchange(Counts(), {});
  }

 private:
  static std::vector<std::pair<std::string, bool>>& Stack() {
    thread_local std::vector<std::pair<std::string, bool>> stack;
    return stack;
  }
  static const std::set<std::string>& NoWork() {
    static const std::set<std::string> names = {"aten::view",
                                                "aten::reshape",
                                                "aten::_reshape_alias",
                                                "aten::t",
                                                "aten::transpose",
                                                "aten::expand",
                                                "aten::select",
                                                "aten::narrow",
                                                "aten::slice",
                                                "aten::unsqueeze",
                                                "aten::squeeze",
                                                "aten::as_strided",
                                                "aten::_unsafe_view",
                                                "aten::alias",
                                                "aten::detach",
                                                "aten::permute",
                                                "aten::unflatten",
                                                "aten::flatten",
                                                "aten::empty",
                                                "aten::empty_strided",
                                                "aten::empty_like",
                                                "aten::resize_",
                                                "aten::to",
                                                "aten::contiguous",
                                                "aten::expand_as",
                                                "aten::result_type",
                                                "aten::lift_fresh",
                                                "aten::set_",
                                                "aten::is_same_size",
                                                "aten::_has_compatible_shallow_copy_type",
                                                "aten::resolve_conj",
                                                "aten::resolve_neg",
                                                "aten::new_empty"};
    return names;
  }
  static std::mutex& Mutex() {
    static std::mutex m;
    return m;
  }
  static std::map<std::string, int>& Counts() {
    static std::map<std::string, int> counts;
    return counts;
  }
  at::CallbackHandle handle_;
};

class ExplicitStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(11);
    lm_ = TransformerLM(ResolvedPreset("tiny"), kCpu);
    ids_ = torch::randint(0, 1000, {2, 16}, torch::kInt64);
    targets_ = torch::randint(0, 1000, {2, 16}, torch::kInt64);
  }
  TransformerLM lm_{nullptr};
  torch::Tensor ids_, targets_;
};

TEST_F(ExplicitStepTest, GivesAutogradsGradientsInFp32) {
  const Step autograd = AutogradStep(lm_, ids_, targets_, std::nullopt);
  lm_->zero_grad();
  const Step explicit_step = ExplicitStepOf(lm_, ids_, targets_, std::nullopt);
  // The same kernels on the same operands, summed in the engine's order: bit
  // for bit on the CPU.
  ExpectSameStep(explicit_step, autograd, 0);
}

TEST_F(ExplicitStepTest, GivesAutogradsGradientsUnderBf16Autocast) {
  const Step autograd = AutogradStep(lm_, ids_, targets_, at::kBFloat16);
  lm_->zero_grad();
  const Step explicit_step = ExplicitStepOf(lm_, ids_, targets_, at::kBFloat16);
  // The same casts at the same places (a cast left out or put elsewhere is
  // off by bf16's rounding): bit for bit too.
  ExpectSameStep(explicit_step, autograd, 0);
}

// The claim behind "same kernels": the explicit step launches the operators
// autograd's forward and backward launch, as many of each. Runs an autograd
// step first, which builds the RoPE table, mask and -inf both share.
void ExpectSameComputeOps(TransformerLM& lm, const torch::Tensor& ids, const torch::Tensor& targets,
                          std::optional<at::ScalarType> autocast) {
  lm->zero_grad();
  AutogradStep(lm, ids, targets, autocast);
  ComputeOpCounter counter;
  lm->zero_grad();
  AutogradStep(lm, ids, targets, autocast);
  const auto autograd = counter.Take();
  lm->zero_grad();
  ExplicitStepOf(lm, ids, targets, autocast);
  const auto explicit_ops = counter.Take();
  EXPECT_GT(autograd.count("aten::mm"), 0u);
  for (const auto& [name, n] : autograd) {
    EXPECT_EQ(explicit_ops.count(name) ? explicit_ops.at(name) : 0, n)
        << name << " (autograd: " << n << ")";
  }
  for (const auto& [name, n] : explicit_ops) {
    EXPECT_TRUE(autograd.count(name)) << name << " x" << n << ": not in autograd's step";
  }
}

TEST_F(ExplicitStepTest, RunsAutogradsComputeOps) {
  for (const auto autocast : {std::optional<at::ScalarType>(), std::optional(at::kBFloat16)}) {
    SCOPED_TRACE(autocast ? "bf16 autocast" : "fp32");
    ExpectSameComputeOps(lm_, ids_, targets_, autocast);
  }
}

TEST_F(ExplicitStepTest, AddsToExistingGradientsAsAccumulateGradDoes) {
  AutogradStep(lm_, ids_, targets_, std::nullopt);
  const Step twice_autograd = AutogradStep(lm_, ids_, targets_, std::nullopt);
  lm_->zero_grad();
  ExplicitStepOf(lm_, ids_, targets_, std::nullopt);
  const Step twice_explicit = ExplicitStepOf(lm_, ids_, targets_, std::nullopt);
  for (const auto& [name, want] : twice_autograd.grads) {
    EXPECT_LE(RelativeError(twice_explicit.grads.at(name), want), 0) << name;
  }
}

TEST_F(ExplicitStepTest, ForwardOnlyKeepsNothingAndRecordsNoGraph) {
  ExplicitStep step(*lm_);
  torch::Tensor logits;
  const torch::Tensor loss = step.Forward(ids_, targets_, /*keep_for_backward=*/false, &logits);
  EXPECT_FALSE(loss.requires_grad());
  EXPECT_FALSE(logits.requires_grad());
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 16, 1000}));
  try {
    step.Backward();
    FAIL() << "Backward after a forward that kept nothing";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("keep_for_backward"), std::string::npos) << e.what();
  }
}

TEST_F(ExplicitStepTest, EachForwardIsBackpropagatedOnce) {
  ExplicitStep step(*lm_);
  step.Forward(ids_, targets_, /*keep_for_backward=*/true);
  step.Backward();
  EXPECT_THROW(step.Backward(), c10::Error);
}

// On the GPU autocast casts more (exp and sum run in fp32 there) and the
// kernels are cuBLAS's; the step must still be autograd's. The mini preset at
// 4 x 64, fp32 and bf16.
TEST(CudaExplicitStepTest, GivesAutogradsGradientsOnTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA, 0);
  for (const auto& [autocast, tol] :
       {std::pair<std::optional<at::ScalarType>, double>{std::nullopt, 1e-5},
        {at::kBFloat16, 1e-3}}) {
    SCOPED_TRACE(autocast ? "bf16 autocast" : "fp32");
    torch::manual_seed(5);
    TransformerLM lm(ResolvedPreset("mini"), kCpu.device(cuda));
    const auto ids = torch::randint(0, 10000, {4, 64}, torch::kInt64).to(cuda);
    const auto targets = torch::randint(0, 10000, {4, 64}, torch::kInt64).to(cuda);
    const Step autograd = AutogradStep(lm, ids, targets, autocast);
    lm->zero_grad();
    const Step explicit_step = ExplicitStepOf(lm, ids, targets, autocast);
    ExpectSameStep(explicit_step, autograd, tol);
    ExpectSameComputeOps(lm, ids, targets, autocast);
    double worst = 0;
    for (const auto& [name, want] : autograd.grads) {
      worst = std::max(worst, RelativeError(explicit_step.grads.at(name), want));
    }
    std::cout << (autocast ? "bf16" : "fp32") << ": largest gradient difference " << worst
              << " (relative to the tensor's largest)\n";
  }
}

TEST_F(ExplicitStepTest, SaysWhichOptionsNeedAutograd) {
  EXPECT_EQ(ExplicitStep::Unsupported(*lm_), "");
  lm_->SetFusedOps(true);
  EXPECT_EQ(ExplicitStep::Unsupported(*lm_), "fused_ops");
  ExplicitStep step(*lm_);
  EXPECT_THROW(step.Forward(ids_, targets_, true), c10::Error);
  lm_->SetFusedOps(false);
  lm_->SetAttention(v1::ATTENTION_IMPL_SDPA);
  EXPECT_EQ(ExplicitStep::Unsupported(*lm_), "attention other than faithful");
  lm_->SetAttention(v1::ATTENTION_IMPL_FAITHFUL);
  lm_->MakeWeightCopies(at::kBFloat16);
  EXPECT_EQ(ExplicitStep::Unsupported(*lm_), "weight_copies");
  lm_->DropWeightCopies();
  EXPECT_EQ(ExplicitStep::Unsupported(*lm_), "");
}

}  // namespace
}  // namespace benchd::worker
