// The course's AdamW (CS336 assignment 1, "Loshchilov & Hutter" with decay
// applied after the Adam update), over a fixed list of parameters. Its state
// (m, v, t per parameter) lives on the parameters' device and stays resident
// with the model between jobs.
#ifndef BENCHD_WORKER_ADAMW_H_
#define BENCHD_WORKER_ADAMW_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace benchd::worker {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

class AdamW {
 public:
  explicit AdamW(std::vector<torch::Tensor> params, AdamWOptions options = {});

  // For every parameter with a gradient, t += 1 and
  //   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g²
  //   p -= lr sqrt(1-b2^t)/(1-b1^t) · m/(sqrt(v)+eps);  then p -= lr wd p.
  // State is allocated at a parameter's first step, as the course does, so a
  // model that only ever runs forward carries none.
  void Step();

  // Bytes held by m and v.
  int64_t StateBytes() const;

 private:
  struct State {
    torch::Tensor m, v;
    int64_t t = 0;
  };
  std::vector<torch::Tensor> params_;
  std::vector<State> state_;
  AdamWOptions options_;
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_ADAMW_H_
