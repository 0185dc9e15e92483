#include "worker/adamw.h"

#include <cmath>

namespace benchd::worker {

AdamW::AdamW(std::vector<torch::Tensor> params, AdamWOptions options)
    : params_(std::move(params)), state_(params_.size()), options_(options) {}

void AdamW::Step() {
  CheckNoWeightCopies("the faithful loop");
  torch::NoGradGuard no_grad;
  const AdamWOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    State& s = state_[i];
    if (!s.m.defined()) {
      s.m = torch::zeros_like(p);
      s.v = torch::zeros_like(p);
    }
    s.t += 1;
    s.m.mul_(o.beta1).add_(g, 1 - o.beta1);
    s.v.mul_(o.beta2).addcmul_(g, g, 1 - o.beta2);
    const double t = static_cast<double>(s.t);
    const double alpha = o.lr * std::sqrt(1 - std::pow(o.beta2, t)) / (1 - std::pow(o.beta1, t));
    p.addcdiv_(s.m, s.v.sqrt().add_(o.eps), -alpha);
    p.add_(p, -o.lr * o.weight_decay);
  }
}

int64_t AdamW::StateBytes() const {
  int64_t bytes = 0;
  for (const State& s : state_) {
    if (s.m.defined()) bytes += s.m.nbytes() + s.v.nbytes();
  }
  return bytes;
}

}  // namespace benchd::worker
