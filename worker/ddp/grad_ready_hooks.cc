#include "worker/ddp/grad_ready_hooks.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace benchd::worker::ddp {

GradReadyHooks::GradReadyHooks(const std::vector<torch::Tensor>& params,
                               std::function<void(const torch::Tensor&)> ready) {
  auto shared = std::make_shared<std::function<void(const torch::Tensor&)>>(std::move(ready));
  for (const torch::Tensor& p : params) {
    std::shared_ptr<torch::autograd::Node> accumulator = torch::autograd::impl::grad_accumulator(p);
    TORCH_CHECK(accumulator, "GradReadyHooks: a parameter without a gradient accumulator");
    const uintptr_t key =
        accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [shared, p](const torch::autograd::variable_list& outputs,
                        const torch::autograd::variable_list&) {
              (*shared)(p);
              return outputs;
            }));
    hooks_.emplace_back(std::move(accumulator), key);
  }
}

GradReadyHooks::~GradReadyHooks() {
  for (auto& [accumulator, key] : hooks_) accumulator->del_post_hook(key);
}

}  // namespace benchd::worker::ddp
