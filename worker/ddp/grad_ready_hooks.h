// When each parameter's gradient becomes final in a backward that runs
// through LibTorch's autograd engine (DdpSpec.step.autograd): a post hook on
// every parameter's AccumulateGrad node, as PyTorch's DistributedDataParallel
// and c10d's Reducer learn it. The explicit backward says it layer by layer
// (ExplicitStep::Backward's callback); this says it parameter by parameter,
// in the order the engine finishes them.
//
// The hooks run on the thread that runs the node: the engine's device thread
// on a GPU (the caller of backward() waits meanwhile), the caller's on a CPU.
// They stay until this object goes, which removes them; the accumulators are
// held so that the hooks outlive each step's graph.
#ifndef BENCHD_WORKER_DDP_GRAD_READY_HOOKS_H_
#define BENCHD_WORKER_DDP_GRAD_READY_HOOKS_H_

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace benchd::worker::ddp {

class GradReadyHooks {
 public:
  // `params` must be leaves that require grad; `ready` gets the parameter
  // whose gradient has just been accumulated.
  GradReadyHooks(const std::vector<torch::Tensor>& params,
                 std::function<void(const torch::Tensor&)> ready);
  ~GradReadyHooks();
  GradReadyHooks(const GradReadyHooks&) = delete;
  GradReadyHooks& operator=(const GradReadyHooks&) = delete;

 private:
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;
};

}  // namespace benchd::worker::ddp

#endif  // BENCHD_WORKER_DDP_GRAD_READY_HOOKS_H_
