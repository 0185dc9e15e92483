#include "worker/adamw.h"

#include <cmath>

namespace benchd::worker {

AdamW::AdamW(std::vector<torch::Tensor> params, AdamWOptions options)
    : params_(std::move(params)), state_(params_.size()), options_(options) {}

void AdamW::Step() {
  CheckNoWeightCopies("the faithful loop");
  torch::NoGradGuard no_grad;
  for (size_t i : WithGradients()) {
    state_[i].t += 1;
    CourseUpdate(i, params_[i].grad());
  }
}

double AdamW::StepSize(int64_t t) const {
  const AdamWOptions& o = options_;
  const double td = static_cast<double>(t);
  return o.lr * std::sqrt(1 - std::pow(o.beta2, td)) / (1 - std::pow(o.beta1, td));
}

void AdamW::CourseUpdate(size_t i, const torch::Tensor& g) {
  const AdamWOptions& o = options_;
  State& s = state_[i];
  torch::Tensor& p = params_[i];
  s.m.mul_(o.beta1).add_(g, 1 - o.beta1);
  s.v.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
  p.addcdiv_(s.m, s.v.sqrt().add_(o.eps), -StepSize(s.t));
  p.add_(p, -o.lr * o.weight_decay);
}

int64_t AdamW::StateBytes() const {
  int64_t bytes = 0;
  for (const State& s : state_) {
    if (s.m.defined()) bytes += s.m.nbytes() + s.v.nbytes();
  }
  return bytes;
}

}  // namespace benchd::worker
