// The course's AdamW (CS336 assignment 1, "Loshchilov & Hutter" with decay
// applied after the Adam update), over a fixed list of parameters. Its state
// (m, v, t per parameter) lives on the parameters' device and stays resident
// with the model between jobs.
#ifndef BENCHD_WORKER_ADAMW_H_
#define BENCHD_WORKER_ADAMW_H_

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <utility>
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
  ~AdamW();

  // For every parameter with a gradient, t += 1 and
  //   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g²
  //   p -= lr sqrt(1-b2^t)/(1-b1^t) · m/(sqrt(v)+eps);  then p -= lr wd p.
  // State is allocated at a parameter's first step, as the course does, so a
  // model that only ever runs forward carries none.
  void Step();

  // The same update through torch's _foreach_ ops: a few multi-tensor kernels
  // for all parameters instead of several kernels per parameter.
  void StepForeach();
  // The same update through at::_fused_adamw_, one kernel per group of
  // parameters at the same step, decay included: torch's AdamW decays before
  // the step and puts eps after the bias correction, so the kernel gets a
  // rescaled lr, weight decay and eps (the algebra is in adamw_impls.cc).
  // CPU and CUDA.
  void StepFused();
  // The foreach update with t kept on the device (a float32 step tensor per
  // parameter) and the bias correction computed there, so the step can be
  // captured in a CUDA graph and replayed. The state (m, v and the step
  // tensors) must already exist when capturing: run it eagerly once first.
  void StepForeachCapturable();
  // After graph replays, which advanced the device step tensors without the
  // host knowing: reads them back (a device sync) so every path agrees on t.
  void SyncHostSteps();

  // The weight_copies option (TransformerLMImpl::MakeWeightCopies): for each
  // (parameter, copy) pair the gradient is the bf16/fp16 copy's, and
  // StepFused updates the fp32 parameter from it and then rewrites the copy
  // from the new parameter; on CUDA one kernel per tensor does both
  // (worker/adamw_copy_kernel.cu), reading and writing 28 bytes per
  // parameter as the fused step without copies does. The other paths refuse
  // to run while copies are set. An empty list ends the option.
  // With copies set, a parameter without one (RMSNorm weights, the
  // embedding) is updated on CUDA by the same kernel from its fp32 gradient,
  // so that every parameter takes the same kernel whether the step runs after
  // the backward or beside it (the overlapped step below).
  void SetWeightCopies(const std::vector<std::pair<torch::Tensor, torch::Tensor>>& pairs);

  // The optimizer_overlap option: StepFused's update, parameter by parameter,
  // while the backward still runs. BeginOverlappedStep (before the backward,
  // on the stream it runs on) advances every trainable parameter's t, on the
  // host and in its device step tensor; OverlappedUpdate(leaf), called when
  // the gradient of `leaf` (a parameter, or its weight copy) is final, runs
  // that parameter's fused update: on CUDA on a side stream, after an event
  // recorded on the current stream (where the gradient was made), so the
  // next layers' backward runs beside it; on a CPU at once.
  // EndOverlappedStep updates what no call reached, undoes the advance for
  // parameters that got no gradient, and makes the current stream wait for
  // the side stream. The numbers are StepFused's: the same kernel per
  // parameter (with weight copies α comes from a device table of the host's
  // values, indexed by the device's t, so a CUDA graph can hold the step).
  // Under capture the state must exist already (run it eagerly once first),
  // and every CUDA parameter must have a weight copy (the fp32 path's kernel,
  // torch's _fused_adamw_, takes an ε that changes with t from the host).
  void BeginOverlappedStep();
  void OverlappedUpdate(const torch::Tensor& leaf);
  void EndOverlappedStep();
  // The tensors whose gradients the optimizer reads: each parameter's weight
  // copy where it has one, else the parameter (those that require grad).
  std::vector<torch::Tensor> GradientLeaves() const;

  // Bytes held by m and v.
  int64_t StateBytes() const;

  // The parameters' step counts t (tests, and checks that paths agree).
  std::vector<int64_t> Steps() const;

 private:
  // One state per parameter, shared by every path, so jobs may switch paths on
  // a resident model.
  struct State {
    torch::Tensor m, v;
    int64_t t = 0;
    // float32 scalar on the parameter's device, for the fused and capturable
    // paths; holds device_t (-1: none yet). The faithful and foreach paths
    // advance only t, so the tensor is refreshed when device_t != t.
    torch::Tensor step;
    int64_t device_t = -1;
  };
  // α_t = lr sqrt(1-b2^t)/(1-b1^t), the course's bias-corrected step size.
  double StepSize(int64_t t) const;
  // The course's update of parameter i from `g` at its current t, in ATen
  // ops (Step, and StepFused's weight copies off CUDA).
  void CourseUpdate(size_t i, const torch::Tensor& g);
  // Parameter i's gradient: its weight copy's where it has one.
  torch::Tensor Grad(size_t i) const;
  // The parameters with a gradient and their states (allocating m and v on a
  // first step, as Step does).
  std::vector<size_t> WithGradients();
  // TORCH_CHECK that no weight copies are set, for the paths without them.
  void CheckNoWeightCopies(const char* path) const;
  // StepFused for the parameters in `idx`, all taking benchd's kernel (KernelPath).
  void StepWeightCopies(const std::vector<size_t>& idx);
  // Whether StepFused updates parameter i with benchd's kernel
  // (adamw_copy_kernel.cu; ATen's course update off CUDA): with weight
  // copies set, every parameter with a copy, and on CUDA every parameter.
  bool KernelPath(size_t i) const;
  // Parameter i's fused update at its current t (already advanced) on the
  // current stream: benchd's kernel (α from the host, or with `device_step`
  // from the table at the device's t) or _fused_adamw_ on its own.
  void FusedUpdate(size_t i, bool device_step);
  void KernelUpdate(size_t i, bool device_step);
  void TorchFusedUpdate(const std::vector<size_t>& group, int64_t t);
  // alpha_table_ (on `device`) holding α_t for every t up to at least `t`.
  void EnsureAlphaTable(int64_t t, const torch::Device& device);
  // Makes states[i].step hold t for each i (fill_ where it is stale).
  void RefreshDeviceSteps(const std::vector<size_t>& idx);
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> copies_;  // parallel to params_ when set; undefined: no copy
  std::vector<State> state_;
  AdamWOptions options_;
  torch::Tensor alpha_table_;  // float32 α_t by t, on the parameters' device
  struct Overlap;              // the overlapped step's bookkeeping and CUDA stream/events
  std::unique_ptr<Overlap> overlap_;
};

}  // namespace benchd::worker

#endif  // BENCHD_WORKER_ADAMW_H_
