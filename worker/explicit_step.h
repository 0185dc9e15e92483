// The faithful model's forward and backward without the autograd engine.
//
// A step of the course's model launches a few thousand small kernels; on the
// GPU machines the host spends more time per kernel than the GPU, and most of
// that host time in the backward is the autograd engine's (building the graph
// in the forward, then per node: scheduling, input buffers, validation): about
// 16 µs per backward kernel against 6 µs for a plain op (bench/op_overhead).
// Python's reference pays the same engine, so a C++ loop over the same
// autograd graph cannot be much faster than Python (docs/results).
//
// ExplicitStep runs the same forward ops below autograd (nothing recorded),
// keeps the tensors autograd would save, and issues the backward as the
// formulas in PyTorch's derivatives.yaml issue it: the same ATen ops on the
// same layouts, each gradient reduced to its input's shape and cast to its
// input's dtype before it is summed (as the engine's validate_outputs does),
// contributions summed in the engine's order, leaves set as AccumulateGrad
// sets them. Autocast stays on in the forward, with the casts autocast makes
// for matmuls made explicit so the backward can use the cast operands.
// Gradients agree with autograd's to float rounding (ExplicitStepTest).
//
// Only the course's ops: attention other than faithful, fused_ops and weight
// copies change the model's ops and run through autograd (Unsupported says
// which).
#ifndef BENCHD_WORKER_EXPLICIT_STEP_H_
#define BENCHD_WORKER_EXPLICIT_STEP_H_

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "worker/transformer.h"

namespace benchd::worker {

class ExplicitStep {
 public:
  // Why `model`, as its options stand now, needs autograd; "" when it does not.
  static std::string Unsupported(const TransformerLMImpl& model);

  // `model` must outlive this object and stay supported while it is used.
  explicit ExplicitStep(TransformerLMImpl& model);
  ~ExplicitStep();
  ExplicitStep(const ExplicitStep&) = delete;
  ExplicitStep& operator=(const ExplicitStep&) = delete;

  // The mean cross-entropy of the model on `token_ids` [B, T] against
  // `targets`, under whatever autocast the caller set (as the model's forward
  // and CrossEntropy). With `keep_for_backward` the tensors Backward needs
  // are kept; `logits`, when given, receives the logits.
  torch::Tensor Forward(const torch::Tensor& token_ids, const torch::Tensor& targets,
                        bool keep_for_backward, torch::Tensor* logits = nullptr);

  // d loss / d parameter of the last Forward (kept for backward) into each
  // parameter's grad: set when undefined, added otherwise (AccumulateGrad).
  // Frees what Forward kept. Call with autocast off, as loss.backward() runs.
  // `grads_ready`, when given, is called layer by layer as the backward
  // reaches the front of the model, with the parameters whose gradients are
  // then final (lm_head, ln_final, layers L-1 .. 0, token_embeddings), so
  // data-parallel training can start their all_reduce while the earlier
  // layers' backward still runs (worker/ddp/gradient_sync.h).
  using GradsReady = std::function<void(const std::vector<torch::Tensor>& params)>;
  void Backward(const GradsReady& grads_ready = {});

 private:
  struct Saved;
  TransformerLMImpl& model_;
  std::unique_ptr<Saved> saved_;
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_EXPLICIT_STEP_H_
